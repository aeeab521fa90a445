// What the tool prints about user input: URLs without their secrets, and
// lock names cut to a readable length.
#ifndef DLOCK_TOOLS_DLOCK_MESSAGES_HPP_
#define DLOCK_TOOLS_DLOCK_MESSAGES_HPP_

#include <string>
#include <string_view>
#include <vector>

namespace dlock::cli {

// `text` with every URL in it (SCHEME://...) passed through
// dlock::describe_url, so no password is printed, wherever the URL came
// from (an argument error quotes raw arguments).
std::string redact_urls(std::string_view text);

// The same, after replacing every verbatim occurrence of each of `urls` (the
// URL arguments as given) with describe_url of it: a password holding a
// blank or a quote would otherwise end the scan early.
std::string redact_urls(std::string_view text, const std::vector<std::string>& urls);

// A lock name for messages: whole up to 80 bytes, else its start and its
// length ("aaaa…(102400 bytes)").
std::string shown_name(std::string_view name);

// What a holder said of itself (LockInfo::holder, an election's id), safe
// to print: other programs wrote it, so control characters become '?', and
// it is cut as a name is.
std::string shown_holder(std::string_view holder);

// redact_urls(text) with every occurrence of `name` replaced by
// shown_name(name): for messages of the library, which quote the name.
std::string tidy(std::string_view text, std::string_view name = {});

}  // namespace dlock::cli

#endif  // DLOCK_TOOLS_DLOCK_MESSAGES_HPP_

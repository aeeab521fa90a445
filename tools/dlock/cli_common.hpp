// What every dlock subcommand shares: the options given to all, errors
// reported with advice and the exit code for them, connecting, durations.
#ifndef DLOCK_TOOLS_DLOCK_CLI_COMMON_HPP_
#define DLOCK_TOOLS_DLOCK_CLI_COMMON_HPP_

#include <atomic>
#include <dlock/dlock.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace dlock::cli {

struct Common {
  std::string url;
  bool quiet = false;    // -q: errors only (no warnings, no wait status)
  bool verbose = false;  // -v: also what went well (acquired, released)
  bool json = false;
};

// What went well: said only with -v (quiet by default, as flock(1) is, so
// that cron mails only about trouble).
void say(const Common& c, const std::string& text);

// An error of the library, `what` it was doing, and what to do about it in
// the terms of the store `url` names; returns the exit code. Secrets and
// long names are cut from the library's text (it may quote both).
int fail(const dlock::Status& s, const std::string& what, const std::string& url, std::string_view name = {});

// The library's own diagnostics (reconnects, renewal trouble) matter while
// CMD runs; before that, the tool reports failures itself, once.
extern std::atomic<bool> library_logs;

// A client for c.url, or nullopt with the failure reported and its exit
// code in `exit_code`.
std::optional<dlock::Client> connect(const Common& c, int& exit_code, std::string_view name = {});

// "500ms", "30s", "2m", "1h", or a bare number of seconds ("0.5").
std::optional<milliseconds> parse_duration(const std::string& text);

}  // namespace dlock::cli

#endif  // DLOCK_TOOLS_DLOCK_CLI_COMMON_HPP_

// The description a grant stores of its holder by default, so that an
// operator can ask who holds a lock (ClientOptions::describe_holder).
#ifndef DLOCK_HOLDER_DESCRIPTION_HPP_
#define DLOCK_HOLDER_DESCRIPTION_HPP_

#include <string>
#include <string_view>

namespace dlock::detail {

// "PROGRAM[PID]@HOST": `label`, or the program's short name (as ps shows
// it), then this process's id (read per call: a forked child describes
// itself) and the host's name. At most kMaxHolderInfo bytes: a long label is
// cut, the pid and host are kept.
std::string describe_holder(std::string_view label);

}  // namespace dlock::detail

#endif  // DLOCK_HOLDER_DESCRIPTION_HPP_

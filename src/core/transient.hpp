// Which failures are worth retrying: nothing reached the server
// (unavailable), or the outcome is unknown and the call is idempotent.
#ifndef DLOCK_CORE_TRANSIENT_HPP_
#define DLOCK_CORE_TRANSIENT_HPP_

#include "dlock/error.hpp"

namespace dlock::detail {

inline bool transient(Errc c) { return c == Errc::unavailable || c == Errc::outcome_unknown; }

}  // namespace dlock::detail

#endif  // DLOCK_CORE_TRANSIENT_HPP_

// The one formula for how long a lease can be trusted on this host.
//
// A grant or renewal sent at t is valid here until t + lease - drift: counted
// from the send (a slow reply cannot stretch it), less an allowance for the
// rate difference between this host's steady clock and the server's
// (lease/100 + 2 ms). Used by the watchdog, late-grant rejection, the fast
// path and Redlock's validity.
#ifndef DLOCK_CORE_VALIDITY_HPP_
#define DLOCK_CORE_VALIDITY_HPP_

#include <chrono>

#include "dlock/options.hpp"

namespace dlock::detail {

inline milliseconds drift(milliseconds lease) { return lease / 100 + milliseconds(2); }

inline std::chrono::steady_clock::time_point valid_until(std::chrono::steady_clock::time_point sent_at,
                                                         milliseconds lease) {
  return sent_at + lease - drift(lease);
}

}  // namespace dlock::detail

#endif  // DLOCK_CORE_VALIDITY_HPP_

// What the recipe classes (SharedMutex, Semaphore, Election) share: a hold
// taken through ClientCore in a given shape, and the blocking API's error
// rules (contention is `false`, anything else throws).
#ifndef DLOCK_RECIPE_CALLS_HPP_
#define DLOCK_RECIPE_CALLS_HPP_

#include <string>

#include "client_core.hpp"

namespace dlock::detail {

// A fresh hold (a new random owner) of `name` in `shape`, waiting up to
// `wait`. Refuses the I/O thread (precondition_failed) as every blocking call.
Result<Lease> take_hold(ClientCore& core, const std::string& name, milliseconds wait, LockOptions options, Shape shape);

// ok: true. busy or timeout: false. Anything else: throws Error.
bool granted_or_throw(const Result<Lease>& r);

}  // namespace dlock::detail

#endif  // DLOCK_RECIPE_CALLS_HPP_

#include "recipe_calls.hpp"

#include "dlock/client.hpp"

namespace dlock::detail {

Result<Lease> take_hold(ClientCore& core, const std::string& name, milliseconds wait, LockOptions options,
                        Shape shape) {
  if (core.on_io_thread())
    return Status(Errc::precondition_failed, "a blocking call on the client's I/O thread (from a callback)");
  // Each hold is its own owner's: one given would be overwritten unseen.
  if (!options.owner.empty())
    return Status(Errc::invalid_argument,
                  "LockOptions::owner: a SharedMutex, Semaphore or Election makes a private owner per hold; "
                  "leave it empty");
  options.owner = Client::random_owner();
  return blocking_acquire(core, name, std::max(wait, milliseconds(0)), options, true, shape);
}

bool granted_or_throw(const Result<Lease>& r) {
  if (r.ok()) return true;
  if (r.code() == Errc::busy || r.code() == Errc::timeout) return false;
  throw Error(r.status());
}

}  // namespace dlock::detail

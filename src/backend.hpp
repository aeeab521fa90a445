// The interface every lock backend implements (Redis today; Redlock,
// ZooKeeper and SQL slot in here). It speaks in lock names and owner tokens;
// the lock algorithms (waiting, re-entry bookkeeping, renewal scheduling, loss
// detection) live above it in ClientCore and the state machines in core/.
//
// Idempotency contract: acquire and release carry the re-entry count the
// caller believes the owner holds, so a call repeated after a lost reply is
// recognised and not applied twice.
//
// Exactness contract: every call names the grant it belongs to (`grant`, an
// id the client makes unique per fresh grant). A call only ever touches the
// hold of that grant: a release or undo delayed in the network cannot delete
// the same owner's next grant, and a renewal cannot extend it.
//
// Threading: all calls and all callbacks happen on the client's I/O thread.
//
// Lifetime, one rule for the whole I/O layer: a handler captures the object
// that posted it as a raw `this`, and every such object (ClientCore, each
// backend, each connection) is destroyed only after the I/O loop has
// drained, when no handler is left to run. ClientCore's handle deleter
// enforces it (ClientCore::destroy); nothing in between needs liveness flags.
// Each callback runs exactly once and never inline (always from a handler of
// its own, so the caller may be iterating its own containers); close() fails
// what is outstanding with cancelled, and no callback runs after those.
#ifndef DLOCK_BACKEND_HPP_
#define DLOCK_BACKEND_HPP_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/options.hpp"

namespace dlock::detail {

struct AcquireCall {
  std::string name;
  std::string owner;
  milliseconds lease{0};
  unsigned held = 0;  // levels the caller believes it holds (0 = fresh grant)
  std::uint64_t grant = 0;  // the grant this call creates or re-enters
  // Which attempt this is (0: none). Redlock numbers its attempts so that a
  // late undo of a failed attempt leaves a later attempt's grant alone.
  std::uint64_t round = 0;
};

struct AcquireOutcome {
  enum class Kind {
    granted,   // fence, depth valid
    busy,      // another owner holds it; holder_ttl = its remaining lease
    lost,      // held > 0 but the owner's hold is gone (no silent re-grant)
    mismatch,  // the server's depth differs from `held` by more than a replay
  };
  Kind kind = Kind::busy;
  std::uint64_t fence = 0;
  unsigned depth = 0;
  milliseconds holder_ttl{-1};  // -1: no expiry set, -2: vanished meanwhile
};

struct ReleaseCall {
  std::string name;
  std::string owner;
  unsigned held = 0;  // depth before this release (>= 1)
  bool all = false;   // free every level (client shutdown)
  // An undo of attempt `round` (AcquireCall::round): only while the hold is
  // still that attempt's. 0: any.
  std::uint64_t round = 0;
  std::uint64_t grant = 0;  // the grant released (AcquireCall::grant)
  // > 0: this grant's acquire may still be in the network (its reply was
  // lost). Refuse that stray copy for this long, so it cannot re-create the
  // lock once released. Set on the last release and on undos of such grants.
  milliseconds tombstone{0};
};

struct ReleaseOutcome {
  enum class Kind {
    released,   // depth now `depth` (0: the lock is free and waiters were woken)
    not_held,   // no lock under the name
    not_owner,  // another owner holds it; nothing touched
    mismatch,   // depth differs: someone else used this owner id
  };
  Kind kind = Kind::released;
  unsigned depth = 0;
};

struct RenewCall {
  std::string name;
  std::string owner;
  std::uint64_t grant = 0;
  milliseconds lease{0};
};

// unconfirmed: extended on the master, but not acknowledged by the replicas
// (WAIT mode): retried like a failed renewal, never reported as renewed.
enum class RenewOutcome { renewed, expired, taken, wrong_type, unconfirmed };

class Backend {
 public:
  virtual ~Backend() = default;

  // Opens connections; `done` gets the first attempt's outcome.
  virtual void start(std::function<void(Status)> done) = 0;
  // Fails everything outstanding with cancelled.
  virtual void close() = 0;

  virtual void acquire(const AcquireCall& call, std::function<void(Result<AcquireOutcome>)> done) = 0;
  virtual void release(const ReleaseCall& call, std::function<void(Result<ReleaseOutcome>)> done) = 0;
  // One round trip for the whole batch; outcomes in call order.
  virtual void renew(const std::vector<RenewCall>& calls,
                     std::function<void(Result<std::vector<RenewOutcome>>)> done) = 0;
  virtual void inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) = 0;

  // Release notifications. watch() counts references per name; `ready` runs
  // once the subscription is confirmed (or failed), so a caller can subscribe
  // before it retries and miss nothing.
  virtual void watch(const std::string& name, std::function<void(Status)> ready) = 0;
  virtual void unwatch(const std::string& name) = 0;
  // `wake(name)`: a release of `name` was published. `resync()`: messages may
  // have been lost (the subscription connection dropped): waiters should retry.
  virtual void set_wake_handlers(std::function<void(const std::string&)> wake, std::function<void()> resync) = 0;
  // Called with false the moment the command connection drops, true when back.
  virtual void set_link_handler(std::function<void(bool up)> handler) = 0;

  // The blocking fast path, called on the caller's own thread (any thread,
  // concurrently: the only thread-safe calls here). One round trip, no hand-
  // off to the I/O thread. nullopt: not offered (TLS, WAIT mode, Redlock);
  // the caller then uses acquire()/release() through the I/O thread. The
  // same idempotency and exactness contracts hold.
  virtual std::optional<Result<AcquireOutcome>> acquire_now(const AcquireCall&) { return std::nullopt; }
  virtual std::optional<Result<ReleaseOutcome>> release_now(const ReleaseCall&) { return std::nullopt; }
  // Opens the fast path's first connection now, on the caller's thread, so
  // that the first blocking call costs one round trip. Failures are ignored
  // (the next call opens one). Thread-safe like the two above.
  virtual void open_blocking() {}

  virtual std::uint64_t commands_sent() const = 0;
  virtual std::uint64_t reconnects() const = 0;
};

}  // namespace dlock::detail

#endif  // DLOCK_BACKEND_HPP_

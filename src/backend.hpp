// The interface every lock backend implements. It speaks in lock names,
// owners and grants; the lock algorithms (waiting, re-entry bookkeeping where
// the server keeps none, renewal scheduling, loss detection) live above it in
// ClientCore and the state machines in core/.
//
// How the servers map onto it:
//   Redis     a lease key per lock (needs renewal), the re-entry depth kept in
//             the key, releases published on a channel per name (watch keyed
//             by name), busy answers carry the holder's remaining lease.
//   Redlock   the same on a majority of independent masters (redlock/).
//   ZooKeeper an ephemeral-sequential queue node per attempt: acquire()
//             creates it once (AcquireCall::attempt names it, so the next
//             attempt of the same acquire finds it and keeps its place) and
//             answers busy with WaitHint::event; watch({name, attempt})
//             watches the node's predecessor only. No renewal: liveness is the
//             session's, pushed as BackendEvents::alive_until and, on expiry,
//             BackendEvents::lost for every hold. abandon() deletes the node.
//             Re-entry is counted by ClientCore (server_reentry = false).
//             Lines: read and permit nodes join the same queue, their kind
//             and permits in the node's name, the holder's info in its data
//             (zookeeper/lock_queue.hpp); a reader waits on the nearest
//             writer ahead, a permit waiter on the N nodes ahead. Every lock
//             is fair already (always_fair). watch({name, 0}) watches the
//             lock's children: every change to its queue (a holder or a
//             waiter came or went) is told as released({name, 0}), and the
//             watch is set again, so an election's observer learns of a new
//             leader (re-armed, and told once, on a new session).
//   etcd      etcd's own lock: a key per attempt, <name>/<lease in hex>,
//             put under the client's one lease; the oldest create revision
//             holds (and is the fence), each waiter watches the key just
//             ahead and its own (watch() as on ZooKeeper). No renewal: the
//             lease's keep-alives push alive_until, and its end lost.
//             Re-entry counted by ClientCore; readers and permits are keys
//             of the same line, their kind at the key's end.
//   SQL       a row per lock with a server-computed expiry (needs renewal),
//             releases sent by NOTIFY (watch keyed by name, a LISTEN), busy
//             answers carry the row's remaining lease.
//   Lines     fair, shared and counted locks (AcquireCall::queued, mode,
//             permits) follow one table of decisions, core/lock_line.hpp:
//             the exclusive holder lives where a plain lock lives, shared
//             holders and the line of waiters beside it, and a release hands
//             the lock to the head of the line (BackendEvents::handed). A
//             backend without Capabilities::lines refuses them with
//             invalid_argument naming why.
//
// Idempotency: acquire and release carry the re-entry count the caller
// believes the owner holds, so a call repeated after a lost reply is
// recognised and not applied twice.
//
// Exactness: every call names the grant it belongs to (`grant`, an id the
// client makes unique per fresh grant). A call only ever touches the hold of
// that grant: a release or undo delayed in the network cannot delete the
// same owner's next grant, and a renewal cannot extend it.
//
// Threading: all calls and all callbacks happen on the client's I/O thread,
// except the blocking fast path (acquire_now, release_now, open_blocking).
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
#include <string_view>
#include <vector>

#include "core/wait_hint.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/options.hpp"

namespace dlock::detail {

// exclusive: one holder. shared: up to `permits` holders at once (a read
// lock, a semaphore permit). Holds are keyed by (name, owner, mode).
enum class LockMode : std::uint8_t { exclusive, shared };

// What a backend can do; ClientCore adapts to it.
struct Capabilities {
  // Holds expire unless renewed (renew() is called on the watchdog's ticks).
  // false: a session keeps them; the backend pushes alive_until and lost.
  bool needs_renewal = true;
  // The server counts re-entry levels (AcquireCall::held > 0 is sent). false:
  // ClientCore counts them and calls acquire only for the first level and
  // release only for the last.
  bool server_reentry = true;
  // Fences strictly increase across every grant of a name (Redlock: only
  // while its fence node answers).
  bool strict_fence = true;
  // Fair, shared and counted locks (core/lock_line.hpp): AcquireCall's
  // queued, mode and permits are honoured. false: refused (check_mode).
  bool lines = false;
  // Every exclusive lock is granted in arrival order already (a queue):
  // AcquireCall::queued changes nothing.
  bool always_fair = false;
};

struct AcquireCall {
  std::string name;
  std::string owner;
  milliseconds lease{0};
  unsigned held = 0;        // levels the caller believes it holds (0 = fresh grant)
  std::uint64_t grant = 0;  // the grant this call creates or re-enters
  // The acquire this attempt belongs to: the same for every attempt of one
  // Client::acquire call (a queue node is found again by it), unique per call.
  std::uint64_t attempt = 0;
  LockMode mode = LockMode::exclusive;
  // Shared holders allowed at once (a semaphore's permits); 0: no limit (a
  // read lock). Every shared caller of a name must agree (invalid_argument).
  unsigned permits = 0;
  // Join the name's line when busy and keep the place while retrying (a fair
  // lock, every SharedMutex and Semaphore call).
  bool queued = false;
  // Who the holder is, for inspect: its description, or LockOptions::holder
  // (an election's candidate id). Empty: none.
  std::string info{};
  // The blocking fast path: a busy answer may leave this attempt's queue
  // node in place, because the acquire goes on waiting under the same
  // attempt id on the I/O thread (false: try once, leave nothing).
  bool keep_place = false;
  // The call waits if busy: a backend that wakes a plain lock's waiters one
  // at a time (Redis) queues it, so that a release wakes it alone. `waited`:
  // an earlier attempt of the call was answered busy (a grant leaves the
  // queue).
  bool waits = false;
  bool waited = false;
  // The blocking fast path returns by then, answered or not (the call's
  // deadline: the wait's end, or for a try the reply budget). Unanswered:
  // Errc::timeout, and the backend cleans up whatever the request may still
  // do. max(): no limit. The asynchronous acquire() ignores it (the client
  // bounds those calls itself).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

struct AcquireOutcome {
  enum class Kind {
    granted,   // fence, depth valid
    busy,      // another owner holds it; hint says how long to wait
    lost,      // held > 0 but the owner's hold is gone (no silent re-grant)
    mismatch,  // the server's depth differs from `held` by more than a replay
  };
  Kind kind = Kind::busy;
  std::uint64_t fence = 0;
  unsigned depth = 0;
  WaitHint hint;
  // Backends without renewal, on a grant: how long the session vouches for
  // it (the proof of this very reply, newer than any alive_until pushed).
  std::optional<std::chrono::steady_clock::time_point> valid_until;

  // A new grant (depth 1) with its fence, and what the session vouches for.
  static AcquireOutcome granted_now(std::uint64_t fence,
                                    std::optional<std::chrono::steady_clock::time_point> until = std::nullopt) {
    AcquireOutcome out;
    out.kind = Kind::granted;
    out.fence = fence;
    out.depth = 1;
    out.valid_until = until;
    return out;
  }
  static AcquireOutcome busy_with(WaitHint h) {
    AcquireOutcome out;
    out.kind = Kind::busy;
    out.hint = h;
    return out;
  }
};

struct ReleaseCall {
  std::string name;
  std::string owner;
  unsigned held = 0;        // depth before this release (>= 1)
  bool all = false;         // free every level (client shutdown)
  std::uint64_t grant = 0;  // the grant released (AcquireCall::grant)
  // > 0: this grant's acquire may still be in the network (its reply was
  // lost). Refuse that stray copy for this long, so it cannot re-create the
  // lock once released. Set on the last release and on undos of such grants.
  milliseconds tombstone{0};
  LockMode mode = LockMode::exclusive;
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

// An acquire that ended without a grant (timeout, cancel, error, shutdown).
// The backend removes whatever the attempt may have left: a queue node, or a
// grant whose reply was lost (in_doubt).
struct AbandonCall {
  std::string name;
  std::string owner;
  std::uint64_t attempt = 0;
  std::uint64_t grant = 0;  // the grant the last attempt asked for
  unsigned held = 0;        // that attempt's AcquireCall::held
  // The last attempt's outcome is unknown: it may have granted `grant`.
  bool in_doubt = false;
  // As ReleaseCall::tombstone: a fresh attempt's copy may still arrive.
  milliseconds tombstone{0};
  LockMode mode = LockMode::exclusive;
  // The attempts were a line's (AcquireCall::queued or shared): a place in
  // the line, or a hand-over, may be left even when nothing is in doubt.
  bool line = false;
  // The attempts waited (AcquireCall::waits, answered busy, or one got no
  // answer and may have joined): the caller leaves the name's waiters,
  // passing a wake-up it was sent on.
  bool waited = false;
};

struct RenewCall {
  std::string name;
  std::string owner;
  std::uint64_t grant = 0;
  milliseconds lease{0};
  LockMode mode = LockMode::exclusive;
  bool line = false;  // a hold of a line (AcquireCall::queued or shared)
};

// unconfirmed: extended on the master, but not acknowledged by the replicas
// (WAIT mode): retried like a failed renewal, never reported as renewed.
enum class RenewOutcome { renewed, expired, taken, wrong_type, unconfirmed };

// Whose release a watch waits for: one attempt's predecessor on ZooKeeper
// and etcd; the attempt itself on Redis (a release wakes the first plain
// waiter alone, a hand-over goes to its recipient's client) and on
// PostgreSQL (plain waiters); every waiter of a name on SQLite. attempt 0:
// an observer.
struct WatchKey {
  std::string name;
  std::uint64_t attempt = 0;
  // It hears what every waiter of the name is told: a line's waiter (fair
  // or shared, AcquireCall::queued: hand-overs), an observer. (Redis tells
  // a line's waiter on its client's channel too.)
  bool broadcast = false;
};

// A waiter the line granted inside someone else's call (core/lock_line.hpp).
struct HandOver {
  std::string name;
  std::string owner;
  std::uint64_t grant = 0;
  std::uint64_t fence = 0;
  // The grant's lease, where the backend says it (0: not said). The other
  // waiters of the name look again by then: a recipient that died holds it
  // only that long, and nobody publishes its end.
  milliseconds lease{0};
};

// A hold the backend knows is gone.
struct HoldRef {
  std::string name;
  std::string owner;
  std::uint64_t grant = 0;
};

// What a backend pushes to the client. Each may be empty.
struct BackendEvents {
  // A release was published: one waiter of `key.name` may retry (attempt
  // 0: any of them; otherwise that attempt's waiter, whose predecessor in a
  // queue went).
  std::function<void(const WatchKey& key)> released;
  // A line granted a waiter of this client: it holds the lock now (the
  // waiter's last busy answer proves the grant came after its send time).
  // Also published as a release of the name for everyone else.
  std::function<void(const HandOver& to)> handed;
  // A line granted a free lock (its holder changed without a release): only
  // observers look again (Election::observe); waiters sleep on.
  std::function<void(const std::string& name)> changed;
  // Notifications may have been lost (the subscription dropped): every
  // waiter retries once.
  std::function<void()> resync;
  // The command link dropped (false) or is back (true).
  std::function<void(bool up)> link;
  // These holds are gone (empty: every hold of this client, a session
  // expired). Pushed before any other client can be granted them.
  std::function<void(const std::vector<HoldRef>& holds, LossReason reason)> lost;
  // Backends without renewal: every hold is valid until `until` (the last
  // sign of the session's life plus its timeout, less drift).
  std::function<void(std::chrono::steady_clock::time_point until)> alive_until;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Capabilities capabilities() const = 0;
  // Set once, before start().
  virtual void set_events(BackendEvents events) = 0;

  // Opens connections; `done` gets the first attempt's outcome.
  virtual void start(std::function<void(Status)> done) = 0;
  // Fails everything outstanding with cancelled.
  virtual void close() = 0;

  virtual void acquire(const AcquireCall& call, std::function<void(Result<AcquireOutcome>)> done) = 0;
  virtual void release(const ReleaseCall& call, std::function<void(Result<ReleaseOutcome>)> done) = 0;
  // Called once for every acquire that ends without a grant after sending
  // at least one attempt; `done` when what it left is gone (or could not be
  // removed: it then expires by itself, and the status says why).
  virtual void abandon(const AbandonCall& call, std::function<void(Status)> done) = 0;
  // One round trip for the whole batch; outcomes in call order. Only called
  // when needs_renewal.
  virtual void renew(const std::vector<RenewCall>& calls,
                     std::function<void(Result<std::vector<RenewOutcome>>)> done) = 0;
  virtual void inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) = 0;
  // Names under which something may be held now (held, or kept by a line)
  // that start with `prefix`, in any order; a name may be stale by the time
  // it is inspected. For operators (Client::list): may read the whole store.
  virtual void names(const std::string& prefix, std::function<void(Result<std::vector<std::string>>)> done) = 0;

  // Release notifications, counted by reference per key. `ready` runs once
  // the watch is in place (or failed: the waiter then polls), so a caller
  // can watch before it retries and miss nothing. Wake-ups arrive through
  // BackendEvents::released.
  virtual void watch(const WatchKey& key, std::function<void(Status)> ready) = 0;
  virtual void unwatch(const WatchKey& key) = 0;
  // An observer of `name` (Election::observe), counted like a watch: told
  // of every change of the name's holders, through BackendEvents::released
  // or changed. Where watches are keyed by name, a watch serves it;
  // ZooKeeper, whose waiters watch only their predecessor, overrides it.
  virtual void observe(const std::string& name, std::function<void(Status)> ready) {
    watch({name, 0, true}, std::move(ready));
  }
  virtual void unobserve(const std::string& name) { unwatch({name, 0, true}); }

  // The blocking fast path, called on the caller's own thread (any thread,
  // concurrently: the only thread-safe calls here). One round trip, no hand-
  // off to the I/O thread. nullopt: not offered for this call (a backend
  // without a fast path, or a case it leaves to the I/O thread, such as a
  // ZooKeeper lock whose base path is missing); the caller then uses
  // acquire()/release() through the I/O thread. The same idempotency and
  // exactness contracts hold.
  virtual std::optional<Result<AcquireOutcome>> acquire_now(const AcquireCall&) { return std::nullopt; }
  virtual std::optional<Result<ReleaseOutcome>> release_now(const ReleaseCall&) { return std::nullopt; }
  // Opens the fast path's first connection now, on the caller's thread, so
  // that the first blocking call costs one round trip. Failures are ignored
  // (the next call opens one). Thread-safe like the two above.
  virtual void open_blocking() {}

  virtual std::uint64_t commands_sent() const = 0;
  virtual std::uint64_t reconnects() const = 0;
};

// The release that undoes what an abandoned attempt may have granted, for
// backends whose attempts leave nothing but a possible grant (Redis,
// Redlock): idempotent and exact, it removes only the level that attempt
// added. nullopt: nothing to undo.
inline std::optional<ReleaseCall> undo_of(const AbandonCall& call) {
  if (!call.in_doubt && call.tombstone.count() == 0) return std::nullopt;
  ReleaseCall undo{call.name, call.owner, call.held + 1, false};
  undo.grant = call.grant;
  undo.tombstone = call.tombstone;
  undo.mode = call.mode;
  return undo;
}

// invalid_argument for a call in a mode a backend without lines
// cannot serve; ok otherwise.
inline Status check_mode(const AcquireCall& call, std::string_view backend, std::string_view why) {
  if (call.mode == LockMode::exclusive && !call.queued) return {};
  return {Errc::invalid_argument,
          std::string(backend) + " does not offer fair, shared or counted locks: " + std::string(why)};
}

}  // namespace dlock::detail

#endif  // DLOCK_BACKEND_HPP_

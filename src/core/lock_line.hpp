// Fair, shared and counted locks, I/O-free: the one table of decisions that
// the SQLite backend and the test fake run as C++, the Redis scripts
// (redis/line_scripts.cpp) as Lua and PostgreSQL (postgres/schema.cpp) as
// PL/pgSQL. The recipes (fair Mutex, SharedMutex, Semaphore, Election) are
// calls in this table; nothing recipe-specific lives in a backend.
//
// The state of one name:
//   holders  who holds it: one exclusive holder, or up to `permits` shared
//            ones (0: no limit, a read lock), each with its own grant,
//            re-entry depth, fence and expiry;
//   line     who waits, oldest ticket first: a waiter joins when it is busy
//            and AcquireCall::queued is set, keeps its place as long as it
//            retries within its lease (each retry refreshes its expiry), and
//            leaves when it is granted, gives up (abandon) or expires.
// Holders and waiters are keyed by owner + grant (exactness, as everywhere).
//
// The decisions, in order, for every call (times are the server's, in ms):
//   1. purge: holders and waiters past their expiry are gone;
//   2. promote: while the head of the line is compatible with the holders,
//      it becomes a holder (fence from the name's counter, expiry now + its
//      lease) and is told so by a hand-over message. So a release grants the
//      next in line inside the same script or transaction, and a holder that
//      expired hands over at the next call that touches the name.
//   3. the call itself:
//      acquire  mine (owner + grant holds): re-entry or replay as for a plain
//               lock (depth == held: a new level; held + 1: a replay; else
//               mismatch). Not mine but held > 0, or tombstoned: lost.
//               Shared with permits that differ from the name's: error.
//               Exclusive by an owner that holds it shared, or shared by one
//               that holds it exclusively: error (an upgrade would wait for
//               itself forever). Grantable = compatible and nobody ahead in
//               the line (a caller not in line has everyone ahead): granted,
//               leaving the line. Else busy; a queued caller joins the line
//               or refreshes its place, and is told to retry within a third
//               of its lease (its heartbeat) or at the first holder's expiry.
//      release  as a plain lock, on the holder keyed by owner + grant; the
//               last level removes it and promotes.
//      abandon  the waiter leaves the line; a hold under its grant (a hand-
//               over or a grant it never heard of) is removed; promote.
//      renew    a holder's or a waiter's expiry becomes now + lease.
// compatible: exclusive needs no holder; shared needs no exclusive holder
// and fewer shared holders than permits (permits 0: no limit).
// So readers that arrive while a writer waits queue behind it (writers are
// not starved), and a line never stalls on a dead or departed waiter.
#ifndef DLOCK_CORE_LOCK_LINE_HPP_
#define DLOCK_CORE_LOCK_LINE_HPP_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend.hpp"
#include "core/lock_row.hpp"

namespace dlock::detail {

struct LineHolder {
  std::string owner;
  std::uint64_t grant = 0;
  LockMode mode = LockMode::exclusive;
  unsigned depth = 1;
  std::uint64_t fence = 0;
  std::int64_t expires_ms = kNoExpiry;
  std::string info{};           // AcquireCall::info
  std::int64_t granted_ms = 0;  // when it was granted (0: unknown)
};

struct LineWaiter {
  std::string owner;
  std::uint64_t grant = 0;
  LockMode mode = LockMode::exclusive;
  std::uint64_t ticket = 0;  // arrival order
  std::int64_t lease_ms = 0;
  std::int64_t expires_ms = 0;
  std::string info;
};

// A grant of a tombstoned owner + grant is refused until `until_ms`.
struct LineTomb {
  std::string owner;
  std::uint64_t grant = 0;
  std::int64_t until_ms = 0;
};

struct LineState {
  std::vector<LineHolder> holders;
  std::vector<LineWaiter> line;  // ascending ticket
  std::vector<LineTomb> tombs;
  unsigned permits = 0;  // of the shared holders and waiters now present
  std::uint64_t next_ticket = 1;

  bool empty() const { return holders.empty() && line.empty() && tombs.empty(); }
};

// A waiter granted by promote(): the backend tells it (BackendEvents::handed).
struct Handed {
  std::string owner;
  std::uint64_t grant = 0;
  std::uint64_t fence = 0;
  std::int64_t lease_ms = 0;  // the grant's lease: it is free by then unless renewed
};

using NextFence = std::function<std::uint64_t()>;

struct LineAcquire {
  Status error;  // invalid_argument (permits) or precondition_failed (upgrade)
  AcquireOutcome outcome;
  std::vector<Handed> handed;  // others granted on the way (never the caller)
};
LineAcquire line_acquire(LineState& s, const AcquireCall& call, std::int64_t now_ms, const NextFence& next_fence);

struct LineRelease {
  ReleaseOutcome outcome;
  std::vector<Handed> handed;
};
LineRelease line_release(LineState& s, const ReleaseCall& call, std::int64_t now_ms, const NextFence& next_fence);

std::vector<Handed> line_abandon(LineState& s, const AbandonCall& call, std::int64_t now_ms,
                                 const NextFence& next_fence);

RenewOutcome line_renew(LineState& s, const RenewCall& call, std::int64_t now_ms);

// Steps 1 and 2 alone (a reader that wants the current state).
std::vector<Handed> line_settle(LineState& s, std::int64_t now_ms, const NextFence& next_fence);

// What inspect reports. `last_fence` is left to the caller.
LockInfo line_info(const LineState& s, std::int64_t now_ms);

}  // namespace dlock::detail

#endif  // DLOCK_CORE_LOCK_LINE_HPP_

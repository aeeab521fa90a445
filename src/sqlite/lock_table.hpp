// The lock table in a SQLite file: its schema, and the rows of held locks as
// core/lock_row.hpp sees them. Every call runs inside the caller's
// WriteTransaction (or a read), on the connection's one thread.
//
//   dlock_meta(key, value)   'schema' = kSchemaVersion, 'fence' = the last
//                            fence granted (shared by every name)
//   dlock_locks(name, ...)   one row per name ever locked; owner NULL = free.
//                            expires_ms is on the host's boot clock of boot_id;
//                            pid, pid_start, pid_ns name the holding process;
//                            `releases` counts releases and hand-overs
//                            (waiters compare it); `info` is what the
//                            holder said of itself (AcquireCall::info).
//   dlock_line(name, owner, grant_id, kind, ...)
//                            the rest of a fair, shared or counted lock
//                            (core/lock_line.hpp): its shared holders (kind
//                            0), its line of waiters (1, ordered by ticket)
//                            and its tombstones (2, expires_ms = until), each
//                            with the process it belongs to; `permits` is the
//                            name's, repeated on every row. A line's
//                            exclusive holder lives in dlock_locks, so plain
//                            acquirers see it. `client`: the client of the
//                            row's waiter (schema 4): a hand-over, and a
//                            change at the head of the line, are told to
//                            that client alone (wake_fifo.hpp).
//   dlock_waiters(name, ticket, member, ...)
//                            a plain lock's waiters, woken one at a time:
//                            a call that will wait joins when it finds the
//                            lock busy (member "<client id>:<attempt>", in
//                            ticket order). A release wakes the first live
//                            one through its client's FIFO (wake_fifo.hpp)
//                            and keeps the free row for it (dlock_locks'
//                            woken, woken_until); the row's `waiters` says
//                            some may wait, so a release without it reads
//                            nothing more.
//
// Older schemas (1: no lines; 2: no grant times; 3: no waiters) are
// upgraded in place when a file is opened.
#ifndef DLOCK_SQLITE_LOCK_TABLE_HPP_
#define DLOCK_SQLITE_LOCK_TABLE_HPP_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend.hpp"
#include "core/lock_row.hpp"
#include "sqlite/database.hpp"
#include "sqlite/host.hpp"

namespace dlock::sqlite {

inline constexpr std::int64_t kSchemaVersion = 4;

struct StoredRow {
  detail::LockRow row;  // meaningful when owner is set
  bool has_owner = false;
  std::string boot;
  ProcessId holder;
  std::int64_t releases = 0;
  std::string info;
  bool waiters = false;          // dlock_waiters may have rows for the name
  std::string woken;             // the free lock is kept for this waiter
  std::int64_t woken_until = 0;  // until then (boot clock of `boot`)
};

// A row of dlock_waiters.
struct QueuedWaiter {
  std::int64_t ticket = 0;
  std::string member;
  std::int64_t expires_ms = 0;
  std::string boot;
  ProcessId process;
};

// A row of dlock_line.
struct LineRow {
  enum Kind : int { holder = 0, waiter = 1, tomb = 2 };
  int kind = holder;
  std::string owner;
  std::uint64_t grant = 0;
  detail::LockMode mode = detail::LockMode::exclusive;
  unsigned permits = 0;
  unsigned depth = 0;
  std::uint64_t fence = 0;
  std::uint64_t ticket = 0;
  std::int64_t lease_ms = 0;
  std::int64_t expires_ms = 0;  // a tomb's until
  std::string info;
  std::string boot;
  ProcessId process;
  std::int64_t granted_ms = 0;  // a holder's grant time (boot clock)
  std::string client;           // the client of a waiter or holder: where its hand-over is told

  bool operator==(const LineRow& o) const {
    return kind == o.kind && owner == o.owner && grant == o.grant && mode == o.mode && permits == o.permits &&
           depth == o.depth && fence == o.fence && ticket == o.ticket && lease_ms == o.lease_ms &&
           expires_ms == o.expires_ms && info == o.info && boot == o.boot && granted_ms == o.granted_ms &&
           process.pid == o.process.pid && process.start == o.process.start && process.ns == o.process.ns &&
           client == o.client;
  }
};

class LockTable {
 public:
  // Creates the schema if missing (in its own transaction) and checks its
  // version: wrong_type if the file has another dlock schema.
  static Result<std::unique_ptr<LockTable>> open(Database& db);

  Result<std::optional<StoredRow>> read(const std::string& name);
  // The row if it still holds at `now_ms`: owner set, this boot, not
  // expired, holder not known dead.
  static const detail::LockRow* live(const std::optional<StoredRow>& stored, std::int64_t now_ms);

  // Stores `row` as held by this process (or by `holder`, a waiter of
  // another process that a line granted).
  Status write(const std::string& name, const detail::LockRow& row, std::string_view info = {},
               const ProcessId* holder = nullptr);
  Status set_expiry(const std::string& name, std::int64_t expires_ms);
  // Frees the name and counts a release.
  Status free(const std::string& name);
  Result<std::uint64_t> next_fence();
  Result<std::uint64_t> last_fence();
  Result<std::int64_t> releases(const std::string& name);
  // Counts a release without freeing the row (a line handed the lock over,
  // or a shared holder left); makes the row if the name has none.
  Status count_release(const std::string& name);
  // The locks `holder` holds in this file (expired or not).
  Result<std::vector<detail::HoldRef>> held_by(const ProcessId& holder);

  // Whether the name has rows in dlock_line (an index lookup).
  Result<bool> has_line(const std::string& name);
  // Whether owner + grant has any row under the name, in either table.
  Result<bool> touches(const std::string& name, const std::string& owner, std::uint64_t grant);
  Result<std::vector<LineRow>> read_line(const std::string& name);
  // The line's head: its holders and tombstones, its first `waiters`
  // waiters by ticket, and owner + grant's own place wherever it is (owner
  // empty: none). A crowd's call reads a few rows, not one per waiter.
  Result<std::vector<LineRow>> read_line_head(const std::string& name, std::size_t waiters, const std::string& owner,
                                              std::uint64_t grant);
  // The newest waiter's ticket (0: none).
  Result<std::uint64_t> last_ticket(const std::string& name);
  // Names with a holder row (stale ones included) that start with `prefix`.
  Result<std::vector<std::string>> names(const std::string& prefix);
  Status put_line(const std::string& name, const LineRow& row);
  Status drop_line(const std::string& name, const std::string& owner, std::uint64_t grant, int kind);

  // A plain lock's waiters (dlock_waiters). join: adds `member` (at the
  // front if `front`, else at the end) or extends its expiry, and marks the
  // row.
  Status join(const std::string& name, const std::string& member, std::int64_t expires_ms, bool front);
  Result<std::optional<QueuedWaiter>> first_waiter(const std::string& name);
  Status drop_waiter(const std::string& name, std::int64_t ticket);
  Status leave(const std::string& name, const std::string& member);
  Result<std::int64_t> count_waiters(const std::string& name);
  // Keeps the (free) row for `member` until `until_ms`.
  Status reserve(const std::string& name, const std::string& member, std::int64_t until_ms);
  // Keeps it for nobody; `waiters` says whether any are left.
  Status clear_woken(const std::string& name);

 private:
  explicit LockTable(Database& db) : db_(db) {}
  Status prepare_all();
  static Result<std::int64_t> number_of(Statement& st, const std::string& name);
  static Result<std::vector<LineRow>> rows_of(Statement& st);
  Database& db_;
  Statement read_, write_, expiry_, free_, bump_fence_, fence_, releases_, held_by_, count_release_, has_line_,
      touches_, read_line_, read_others_, read_head_, read_own_, max_ticket_, put_line_, drop_line_, names_, join_,
      mark_waiters_, first_waiter_, drop_ticket_, drop_member_, count_waiters_, reserve_, clear_woken_;
};

}  // namespace dlock::sqlite

#endif  // DLOCK_SQLITE_LOCK_TABLE_HPP_

// One connection to a SQLite lock file and the calls of the backend
// interface on it, each one write transaction. Used by one thread at a time:
// the backend keeps one for its I/O thread and one, behind a mutex, for the
// blocking fast path on callers' threads.
//
// The file at the path is the lock table: if it was deleted or replaced
// (rm, mv), every call first opens the file now there, and this process's
// holds in the old one are gone (take_gone()). A call whose file moved while
// it ran did nothing that counts: a grant is refused (unavailable), a
// renewal reports expired, a release not_held.
#ifndef DLOCK_SQLITE_LOCK_STORE_HPP_
#define DLOCK_SQLITE_LOCK_STORE_HPP_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend.hpp"
#include "core/lock_line.hpp"
#include "sqlite/database.hpp"
#include "sqlite/lock_table.hpp"

namespace dlock::sqlite {

class LockStore {
 public:
  // Opens the file (after checking its file system), sets the pragmas and
  // makes or checks the schema.
  static Result<std::unique_ptr<LockStore>> open(const std::string& path, std::chrono::milliseconds busy);

  // `holder`: set on a busy answer to the process that holds the lock.
  // `member`: the caller's place among a plain lock's waiters if it will
  // wait ("<client id>:<attempt>"; empty: none); a line's call: the
  // caller's client id, where its hand-over is told.
  Result<detail::AcquireOutcome> acquire(const detail::AcquireCall& call, std::optional<ProcessId>* holder = nullptr,
                                         const std::string& member = {});
  Result<detail::ReleaseOutcome> release(const detail::ReleaseCall& call);
  // Removes what an acquire that ended without a grant left: its place in a
  // line, a hand-over it never heard of, or a grant whose outcome was unknown.
  // `member`: as acquire's; it leaves the name's waiters (AbandonCall::waited).
  Status abandon(const detail::AbandonCall& call, const std::string& member = {});
  // A plain waiter leaves (its client is gone, or its call ended when it was
  // woken): if the free lock was kept for it, the next one is woken.
  Status leave(const std::string& name, const std::string& member);
  // Whether abandon(call) has anything to do: false when the attempt left
  // nothing (a read, no transaction).
  Result<bool> abandon_needed(const detail::AbandonCall& call);
  Result<std::vector<detail::RenewOutcome>> renew(const std::vector<detail::RenewCall>& calls);
  Result<LockInfo> inspect(const std::string& name);
  Result<std::vector<std::string>> names(const std::string& prefix);
  // The name's release counter (0 if never locked).
  Result<std::int64_t> releases(const std::string& name);

  // From now on a call waits this long for another connection's write lock.
  void set_busy(std::chrono::milliseconds busy) {
    busy_ = busy;
    if (db_) db_->set_busy_limit(busy);
  }
  // Opens the file now at the path if the one open was deleted or replaced.
  Status follow_file();
  // This process's holds in files left behind since the last call (each
  // reported once).
  std::vector<detail::HoldRef> take_gone() { return std::exchange(gone_, {}); }

  // What the calls since the last take_news() did that others must hear of:
  // names whose release counter moved (a release, a holder or waiter gone,
  // a hand-over; who got it is read back by holders()).
  // And the turns to send: a plain waiter woken (the lock is kept for it),
  // or told to stand by (the woken one may never come).
  struct Turn {
    enum Kind { woken, stand_by, line };  // line: the name's line changed (a hand-over, a new head)
    std::string name;
    std::string member;  // a plain waiter's; a line's: its client id
    Kind kind = woken;
  };
  struct News {
    std::vector<std::string> released;
    std::vector<Turn> turns;
    bool empty() const { return released.empty() && turns.empty(); }
  };
  static constexpr std::int64_t kTurnMs = 500;  // how long a woken waiter's lock is kept
  // How many of a line's waiters a call reads (load_line): its head.
  static constexpr std::size_t kLineWindow = 32;
  static constexpr std::size_t kWholeLine = static_cast<std::size_t>(-1);
  News take_news() { return std::exchange(news_, {}); }

  // Who holds `name` now (one read, no write transaction): after a release
  // counter moved, a waiter handed the lock learns it from here, and nobody
  // else need retry while it is held.
  Result<std::vector<detail::Handed>> holders(const std::string& name);

 private:
  LockStore(std::string path, std::chrono::milliseconds busy) : path_(std::move(path)), busy_(busy) {}
  Status open_file();
  // body() in one write transaction; *moved tells whether the file was
  // deleted or replaced by the time the commit was done.
  template <class T, class F>
  Result<T> in_transaction(bool* moved, F&& body);
  struct Line;  // a name's line as read in a transaction
  // The whole line, or (window) its holders, its first `window` waiters and
  // owner + grant's own place: a call decides on the head of the line. One
  // whose decision reached past the window decides again on the whole line.
  Result<Line> load_line(const std::string& name, std::int64_t now, std::size_t window = kWholeLine,
                         const std::string& owner = {}, std::uint64_t grant = 0);
  // The line read for a decision, and the state `decide` left: its head
  // first, then the whole line if the decision reached past the head.
  template <class Decide>
  Result<std::pair<Line, detail::LineState>> decide_on_line(const std::string& name, std::int64_t now,
                                                            const std::string& owner, std::uint64_t grant,
                                                            Decide&& decide);
  // Writes back what the decision changed; counts a release if someone
  // left or was handed the lock.
  // `client`: the caller's, for the rows it adds.
  Status store_line(const std::string& name, const Line& before, const detail::LineState& after,
                    const std::vector<detail::Handed>& handed, const std::string& client = {});
  Result<bool> store_exclusive(const std::string& name, const Line& before, const detail::LineState& after);
  Status store_rows(const std::string& name, const Line& before, const detail::LineState& after,
                    const std::string& client);
  static bool someone_left(const detail::LineState& before, const detail::LineState& after);
  std::function<std::uint64_t()> fence_source(Status* error);
  // A plain release inside the caller's transaction.
  Result<detail::ReleaseOutcome> release_plain(const detail::ReleaseCall& call, std::int64_t now);
  // Inside a transaction: the first live waiter is woken and the free row
  // kept for it; false if none waits.
  Result<bool> wake_next(const std::string& name, std::int64_t now);
  Status join(const std::string& name, const std::string& member, std::int64_t ttl_ms, bool front, std::int64_t now);
  Status leave_in_transaction(const std::string& name, const std::string& member, std::int64_t now);

  std::string path_;
  std::chrono::milliseconds busy_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<LockTable> table_;  // over *db_
  std::vector<detail::HoldRef> gone_;
  News news_;     // of committed calls
  News pending_;  // of the transaction under way
};

}  // namespace dlock::sqlite

#endif  // DLOCK_SQLITE_LOCK_STORE_HPP_

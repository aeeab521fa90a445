#include "sqlite/sqlite_backend.hpp"

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "core/token.hpp"
#include "sqlite/host.hpp"
#include "sqlite/lock_store.hpp"
#include "sqlite/wake_fifo.hpp"
#include "sqlite/wakeups.hpp"
#include "waiter_turns.hpp"

namespace dlock::sqlite {
namespace {

namespace asio = boost::asio;
using detail::AbandonCall;
using detail::AcquireCall;
using detail::AcquireOutcome;
using detail::ReleaseCall;
using detail::ReleaseOutcome;
using detail::RenewCall;
using detail::RenewOutcome;
using detail::WatchKey;

// How long the I/O thread's connection itself waits for another process's
// write lock before the call is put off to a timer: dlock's own
// transactions hold it for microseconds.
constexpr std::chrono::milliseconds kInlineBusy{5};

// The statements run on the I/O thread (they are local, and wait only for
// another process's write lock, which every dlock transaction holds for
// microseconds), or, for the blocking fast path, on the caller's thread
// through a second connection: a hop to the I/O thread costs more than the
// transaction when the cores are busy.
//
// No thread sleeps long in SQLite's busy handler: each connection waits
// kInlineBusy for another program's write lock. Then an acquire answers
// busy (unavailable) and the client retries it within the caller's wait; a
// release, renewal or undo goes on from a timer until busy_timeout_ms has
// passed, in order (one queue), while the I/O thread serves everything
// else: reads, wake-ups, timers, losses.
class SqliteBackend final : public detail::Backend {
 public:
  SqliteBackend(asio::io_context& io, SqliteConfig config)
      : io_(io),
        config_(std::move(config)),
        wakeups_(io, config_.path),
        fifo_(io, config_.path, client_id_),
        turns_(
            io, [this](const std::string& name, std::uint64_t attempt) { on_turn(name, attempt); },
            [this](const std::string& name, std::uint64_t attempt) { pass_turn(name, attempt); }),
        retry_(io) {}

  // Leases renewed, re-entry in the row; lines in dlock_line beside it.
  detail::Capabilities capabilities() const override {
    detail::Capabilities caps;
    caps.lines = true;
    return caps;
  }
  void set_events(detail::BackendEvents events) override { events_ = std::move(events); }

  void start(std::function<void(Status)> done) override {
    auto store = LockStore::open(config_.path, config_.busy);  // the schema may wait: nothing else runs yet
    Status s = store.status();
    if (store.ok()) {
      store_ = std::move(*store);
      store_->set_busy(std::min(config_.busy, kInlineBusy));
      s = wakeups_.open([this] { check_releases(); }, [this] { check_file(); });
      if (s.ok() && !wakeups_.inotify_status().ok() && config_.log)
        config_.log(LogLevel::warning, "sqlite: " + wakeups_.inotify_status().message());
      if (s.ok()) {
        const Status door = fifo_.open([this](std::string_view line) { on_door(line); });
        wake_one_.store(door.ok());
        if (!door.ok() && config_.log)
          config_.log(LogLevel::warning, "sqlite: " + door.message() + ": every release wakes every waiter");
      }
    }
    post(std::move(done), s);
  }

  void close() override {
    closed_ = true;
    turns_.close();
    door_timer_.cancel();
    fifo_.close();
    wakeups_.close();
    store_.reset();
    retry_.cancel();
    while (!writes_.empty()) {  // each fails with cancelled (no store)
      auto write = std::move(writes_.front());
      writes_.pop_front();
      write.run(true);
    }
    std::lock_guard lk(fast_mu_);
    fast_closed_ = true;
    fast_.reset();
  }

  // Not queued, so a wait's deadline holds: after kInlineBusy the busy
  // answer goes back, and the client retries within the wait (and
  // error_retry). Refused while a write of this client waits for the write
  // lock, so it never overtakes a release or an abandon.
  void acquire(const AcquireCall& call, std::function<void(Result<AcquireOutcome>)> done) override {
    if (!store_) return post(std::move(done), closed());
    if (!writes_.empty()) return post(std::move(done), Result<AcquireOutcome>(write_lock_busy()));
    ++commands_;
    std::optional<ProcessId> holder;
    auto out = busy_if_locked(store_->acquire(call, &holder, member_of(call)));
    report_gone(*store_);
    deliver(*store_);
    if (holder && watched(call.name)) watch_holder(call.name, *holder);
    post(std::move(done), std::move(out));
  }

  void release(const ReleaseCall& call, std::function<void(Result<ReleaseOutcome>)> done) override {
    queue_call(std::move(done), [call](LockStore& store) { return store.release(call); });
  }

  // A plain attempt leaves nothing behind but a grant whose commit's outcome
  // was unknown; a queued or shared one may leave its place in the line, or
  // a hand-over it never heard of. A read first tells whether there is
  // anything to remove (no write transaction for every try that was busy).
  void abandon(const AbandonCall& call, std::function<void(Status)> done) override {
    if (!store_) return post(std::move(done), call.in_doubt ? closed() : Status());
    const std::string member = call.waited && !call.line && wake_one_ ? member_of(call.attempt) : std::string();
    auto needed = store_->abandon_needed(call);
    report_gone(*store_);
    if (needed.ok() && !*needed) return post(std::move(done), Status());
    queue_call(std::move(done), [call, member](LockStore& store) { return store.abandon(call, member); });
  }

  void renew(const std::vector<RenewCall>& calls,
             std::function<void(Result<std::vector<RenewOutcome>>)> done) override {
    queue_call(std::move(done), [calls](LockStore& store) { return store.renew(calls); });
  }

  void inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) override {
    if (!store_) return post(std::move(done), Result<LockInfo>(closed()));
    ++commands_;
    post(std::move(done), store_->inspect(name));
  }

  void names(const std::string& prefix, std::function<void(Result<std::vector<std::string>>)> done) override {
    if (!store_) return post(std::move(done), Result<std::vector<std::string>>(closed()));
    ++commands_;
    post(std::move(done), store_->names(prefix));
  }

  // A plain waiter is woken through this client's door (its FIFO), alone;
  // a line's waiter hears of its hand-over there too. Observers hear every
  // release of the file (the wake file): a failed inotify leaves them
  // their lease-capped waits (ready gets the status: the caller then
  // polls). Without a door, waiters wait as observers do.
  void watch(const WatchKey& key, std::function<void(Status)> ready) override {
    if (!key.broadcast && wake_one_) {
      turns_.add(key.name, key.attempt);
      ++plain_[key.name];
      check_door_soon();
      return post(std::move(ready), Status());
    }
    if (key.attempt != 0 && wake_one_) {  // a line's waiter: told through the door too
      ++line_[key.name];
      check_door_soon();
      return post(std::move(ready), Status());
    }
    Status s = wakeups_.listen(true);
    Watch& w = watches_[key.name];
    watched_names_.store(watches_.size());
    if (w.count++ == 0 && store_) {
      auto seen = store_->releases(key.name);
      report_gone(*store_);
      w.releases = seen.ok() ? *seen : -1;
    }
    post(std::move(ready), s);
  }

  void unwatch(const WatchKey& key) override {
    if (wake_one_ && (!key.broadcast || key.attempt != 0)) {
      if (!key.broadcast) turns_.remove(key.name, key.attempt);
      auto& by_name = key.broadcast ? line_ : plain_;
      if (auto p = by_name.find(key.name); p != by_name.end() && --p->second <= 0) {
        by_name.erase(p);
        if (!watched(key.name)) wakeups_.forget_process(key.name);
      }
      return;
    }
    auto it = watches_.find(key.name);
    if (it == watches_.end() || --it->second.count > 0) return;
    watches_.erase(it);
    watched_names_.store(watches_.size());
    if (!watched(key.name)) wakeups_.forget_process(key.name);
    if (watches_.empty()) (void)wakeups_.listen(false);
  }

  // The fast path: a fresh grant or a last release on the caller's thread.
  std::optional<Result<AcquireOutcome>> acquire_now(const AcquireCall& call) override {
    std::lock_guard lk(fast_mu_);
    if (!open_fast()) return std::nullopt;
    ++commands_;
    fast_->set_busy(std::min(config_.busy, kInlineBusy));  // the caller's wait goes on in the client
    std::optional<Result<AcquireOutcome>> out;
    if (call.queued && !call.keep_place) {  // a try: no place in the line stays behind
      AcquireCall once = call;
      once.queued = false;
      out = busy_if_locked(fast_->acquire(once));
    } else {
      out = busy_if_locked(fast_->acquire(call, nullptr, member_of(call)));
    }
    report_gone(*fast_);
    deliver_fast(*fast_);
    return out;
  }

  std::optional<Result<ReleaseOutcome>> release_now(const ReleaseCall& call) override {
    std::lock_guard lk(fast_mu_);
    if (!open_fast()) return std::nullopt;
    ++commands_;
    fast_->set_busy(config_.busy);  // a release has no deadline: failing it would leave the lock held
    auto out = fast_->release(call);
    report_gone(*fast_);
    deliver_fast(*fast_);
    return out;
  }

  void open_blocking() override {
    std::lock_guard lk(fast_mu_);
    (void)open_fast();
  }

  std::uint64_t commands_sent() const override { return commands_.load(std::memory_order_relaxed); }
  std::uint64_t reconnects() const override { return 0; }

 private:
  struct Watch {
    int count = 0;
    std::int64_t releases = -1;  // the name's release counter when last looked at
  };

  // This client's place among a plain lock's waiters for a call that will
  // wait; for a line's call (found by its owner), the client where its
  // hand-over is told.
  std::string member_of(const AcquireCall& call) const {
    if (!wake_one_) return {};
    if (call.queued || call.mode != detail::LockMode::exclusive) return client_id_;
    return call.waits ? member_of(call.attempt) : std::string();
  }
  std::string member_of(std::uint64_t attempt) const { return client_id_ + ':' + std::to_string(attempt); }

  bool watched(const std::string& name) const {
    return watches_.count(name) || plain_.count(name) || line_.count(name);
  }

  // A line written to this client's door: a plain waiter's turn or
  // stand-by, or "c:<name>", the name's line changed (a hand-over to one of
  // this client's waiters, or one of them first in line now).
  void on_door(std::string_view line) {
    if (closed_) return;
    if (line.starts_with("c:")) {
      const std::string name(line.substr(2));
      if (line_.count(name) || watches_.count(name)) tell(name);
      return;
    }
    detail::WaiterTurns::Message m;
    if (detail::WaiterTurns::parse(line, m)) turns_.deliver(m);
  }

  // A turn for one of this client's waiters.
  void on_turn(const std::string& name, std::uint64_t attempt) {
    if (!closed_ && events_.released) events_.released({name, attempt});
  }

  // A turn for an attempt that no longer waits: the next waiter's.
  void pass_turn(const std::string& name, std::uint64_t attempt) {
    queue_call(std::function<void(Status)>([](Status) {}),
               [name, member = member_of(attempt)](LockStore& store) { return store.leave(name, member); });
  }

  // The turns the committed calls gave, sent (any thread that owns
  // `store`): a waiter whose client is gone leaves, and the turn goes on.
  void send_turns(LockStore& store, std::vector<LockStore::Turn> turns) {
    for (int round = 0; round < 16 && !turns.empty(); ++round) {
      for (const auto& t : turns) {
        if (t.kind == LockStore::Turn::line) {
          (void)WakeFifo::send(config_.path, t.member, "c:" + t.name);  // gone: its lease frees it
          continue;
        }
        const auto colon = t.member.find(':');
        if (colon == std::string::npos) continue;
        std::uint64_t attempt = std::strtoull(t.member.c_str() + colon + 1, nullptr, 10);
        const bool woken = t.kind == LockStore::Turn::woken;
        const std::string line = woken ? detail::WaiterTurns::turn_message(attempt, t.name)
                                       : detail::WaiterTurns::stand_by_message(attempt, LockStore::kTurnMs, t.name);
        if (WakeFifo::send(config_.path, t.member.substr(0, colon), line) == WakeFifo::Sent::gone && woken) {
          ++commands_;
          (void)store.leave(t.name, t.member);
        }
      }
      turns = store.take_news().turns;  // a leave's (its releases: none)
    }
  }

  // A write on the I/O thread: run(last) tries it once and returns false
  // (having answered nothing) if the write lock was busy and `last` is
  // false; otherwise it answers and returns true.
  struct Write {
    std::function<bool(bool last)> run;
    std::chrono::steady_clock::time_point until;
    int tries = 0;
  };

  // A write call queued behind the others: `call` runs on the store once
  // no other process holds the write lock (or, the last try, anyway), and
  // `done` gets its answer (Status or Result<T>).
  template <class Out, class Call>
  void queue_call(std::function<void(Out)> done, Call call) {
    queue_write([this, call = std::move(call), done = std::move(done)](bool last) {
      if (!store_) {
        post(done, Out(closed()));
        return true;
      }
      Out out = call(*store_);
      report_gone(*store_);
      if (!last && waits_for_write_lock(status_of(out))) return false;
      ++commands_;
      deliver(*store_);
      post(done, std::move(out));
      return true;
    });
  }
  static const Status& status_of(const Status& s) { return s; }
  template <class T>
  static Status status_of(const Result<T>& r) {
    return r.status();
  }

  void queue_write(std::function<bool(bool last)> run) {
    writes_.push_back({std::move(run), std::chrono::steady_clock::now() + config_.busy});
    if (writes_.size() == 1 && !retrying_) run_writes();
  }

  void run_writes() {
    while (!writes_.empty()) {
      Write& w = writes_.front();
      if (!w.run(closed_ || std::chrono::steady_clock::now() >= w.until)) {
        // 1 ms, then 2 ms, as the busy handler backs off (a timer's wake-up
        // costs more than a sleep, so it starts later).
        const auto pause = std::chrono::milliseconds(w.tries++ == 0 ? 1 : 2);
        retrying_ = true;
        retry_.expires_after(std::min<std::chrono::steady_clock::duration>(
            pause, std::max<std::chrono::steady_clock::duration>(w.until - std::chrono::steady_clock::now(), {})));
        retry_.async_wait([this](const boost::system::error_code& ec) {
          retrying_ = false;
          if (!ec && !closed_) run_writes();
        });
        return;
      }
      writes_.pop_front();
    }
  }

  // Another connection kept the write lock past kInlineBusy.
  static bool waits_for_write_lock(const Status& s) {
    if (s.code() != Errc::unavailable || s.backend_code().empty()) return false;
    const int rc = std::atoi(s.backend_code().c_str()) & 0xff;
    return rc == 5 /* SQLITE_BUSY */ || rc == 6 /* SQLITE_LOCKED */;
  }

  // An acquire that found the file's write lock taken (another process is
  // granting, releasing, or a program keeps the file locked) did nothing:
  // the lock is busy for now, as if held, and the caller looks again
  // shortly, backing off with jitter (a crowd arriving at once would
  // otherwise keep the write lock contended by its own retries). So a try
  // answers busy and a wait ends by its deadline as a timeout, as on a
  // frozen server (an error would end a Mutex wait in an exception).
  static AcquireOutcome write_lock_busy() {
    AcquireOutcome out;
    out.kind = AcquireOutcome::Kind::busy;
    out.hint = detail::WaitHint::poll(milliseconds(-1));
    return out;
  }
  static Result<AcquireOutcome> busy_if_locked(Result<AcquireOutcome> r) {
    if (!r.ok() && waits_for_write_lock(r.status())) return write_lock_busy();
    return r;
  }

  template <class Done, class Value>
  void post(Done done, Value value) {
    asio::post(io_, [done = std::move(done), value = std::move(value)]() mutable { done(std::move(value)); });
  }
  static Status closed() { return {Errc::cancelled, "the client is closed"}; }

  // REQUIRES: fast_mu_ held. false: not offered (closed, or the file could
  // not be opened: the I/O thread's path reports why).
  bool open_fast() {
    if (fast_closed_) return false;
    if (!fast_) {
      auto store = LockStore::open(config_.path, config_.busy);
      if (!store.ok()) return false;
      fast_ = std::move(*store);
    }
    return true;
  }

  // This process's holds in a lock file that was deleted or replaced are
  // lost; told on the I/O thread (any thread may call this).
  void report_gone(LockStore& store) {
    auto gone = store.take_gone();
    if (gone.empty()) return;
    asio::post(io_, [this, gone = std::move(gone)] {
      if (!closed_ && events_.lost) events_.lost(gone, LossReason::expired);
    });
  }

  // The directory changed under the lock file's name: if it is another file
  // now, its holders learn at once rather than at their next renewal.
  void check_file() {
    if (closed_ || !store_) return;
    (void)store_->follow_file();
    report_gone(*store_);
  }

  // What a committed call did that others must hear of (I/O thread): every
  // name whose release counter moved is announced (tell() says who holds
  // it now: a waiter of this client handed the lock holds it at once).
  void deliver(LockStore& store) {
    auto news = store.take_news();
    send_turns(store, std::move(news.turns));
    std::sort(news.released.begin(), news.released.end());
    news.released.erase(std::unique(news.released.begin(), news.released.end()), news.released.end());
    for (const auto& name : news.released) announce_release(name);
  }

  // The same from a caller's thread (REQUIRES: fast_mu_ held).
  void deliver_fast(LockStore& store) {
    auto news = store.take_news();
    if (news.empty()) return;
    send_turns(store, std::move(news.turns));
    if (!news.released.empty()) wakeups_.ring();  // other processes
    // This one's waiters, through the I/O thread, if there are any: a watch
    // made after this check is followed by an attempt that sees the commit.
    if (watched_names_.load() == 0) return;
    asio::post(io_, [this, news = std::move(news)] {
      if (closed_) return;
      for (const auto& name : news.released) announce_release(name, false);
    });
  }

  // After the commit: this client's waiters are told at once (if it has
  // any for the name: a plain release nobody here waits for reads nothing
  // more), other processes' through the wake file.
  void announce_release(const std::string& name, bool ring = true) {
    if (closed_) return;
    if (ring) wakeups_.ring();
    auto it = watches_.find(name);
    if (it == watches_.end() || !store_) return;
    auto seen = store_->releases(name);
    if (seen.ok()) it->second.releases = *seen;
    tell(name);
  }

  // A name's release counter moved. Held again (a hand-over, or a free lock
  // taken): its holders are told (a waiter of this client among them takes
  // the grant), observers look, and the other waiters sleep on: they could
  // not be granted before the next change anyway, and each retry would be a
  // write transaction. Free: every waiter retries.
  void tell(const std::string& name) {
    auto holders = store_ ? store_->holders(name) : Result<std::vector<detail::Handed>>(closed());
    if (holders.ok() && !holders->empty()) {
      for (const auto& h : *holders)
        asio::post(io_, [this, to = detail::HandOver{name, h.owner, h.grant, h.fence}] {
          if (!closed_ && events_.handed) events_.handed(to);
        });
      asio::post(io_, [this, name] {
        if (!closed_ && events_.changed) events_.changed(name);
      });
      return;
    }
    asio::post(io_, [this, name] {
      if (!closed_ && events_.released) events_.released({name, 0});
    });
  }

  // While waiters wait on the door, it is looked at every second: one
  // removed or replaced (an operator cleaning up, a directory deleted) is
  // made again and every waiter looks again, since a release that found no
  // door passed over them.
  void check_door_soon() {
    if (door_check_armed_) return;
    door_check_armed_ = true;
    door_timer_.expires_after(kDoorCheck);
    door_timer_.async_wait([this](const boost::system::error_code& ec) {
      door_check_armed_ = false;
      if (ec || closed_ || (plain_.empty() && line_.empty())) return;
      if (!fifo_.intact()) {
        const Status s = fifo_.reopen();
        if (config_.log)
          config_.log(s.ok() ? LogLevel::info : LogLevel::warning,
                      s.ok() ? "sqlite: this client's door was removed or replaced; made again"
                             : "sqlite: this client's door was removed and cannot be made again: " + s.message());
        if (events_.resync) events_.resync();
      }
      check_door_soon();
    });
  }

  // The wake file was written: which watched names saw a release? The
  // wake-ups are posted: a waiter woken may unwatch at once.
  void check_releases() {
    if (closed_ || !store_) return;
    std::vector<std::string> released;
    for (auto& [name, w] : watches_) {
      auto seen = store_->releases(name);
      report_gone(*store_);
      if (!seen.ok()) {
        asio::post(io_, [this] {
          if (!closed_ && events_.resync) events_.resync();
        });
        return;
      }
      if (*seen == w.releases) continue;
      w.releases = *seen;
      released.push_back(name);
    }
    for (const auto& name : released) tell(name);
  }

  // A holder on this host that dies wakes the name's waiters at once.
  void watch_holder(const std::string& name, const ProcessId& holder) {
    if (!can_check_pids() || holder.ns.empty() || holder.ns != self().ns || holder.pid == self().pid) return;
    wakeups_.watch_process(name, holder, [this, name] {
      if (!closed_ && events_.released) events_.released({name, 0});
    });
  }

  asio::io_context& io_;
  SqliteConfig config_;
  Wakeups wakeups_;
  std::unique_ptr<LockStore> store_;  // the I/O thread's
  detail::BackendEvents events_;
  const std::string client_id_ = detail::random_hex16();  // its FIFO's name
  WakeFifo fifo_;
  asio::steady_timer door_timer_{io_};
  bool door_check_armed_ = false;
  static constexpr std::chrono::seconds kDoorCheck{1};
  std::atomic<bool> wake_one_{false};  // the FIFO is open: plain waiters are woken one at a time
  detail::WaiterTurns turns_;
  std::map<std::string, int> plain_;           // plain waiters by name (their turns come through fifo_)
  std::map<std::string, int> line_;            // a line's waiters by name (told through fifo_ too)
  std::map<std::string, Watch> watches_;       // the others' (observers), by name: they hear every release
  std::atomic<std::size_t> watched_names_{0};  // watches_.size(), for the fast path's threads
  std::atomic<std::uint64_t> commands_{0};
  bool closed_ = false;
  std::deque<Write> writes_;  // in order; the front one runs or waits on retry_
  asio::steady_timer retry_;
  bool retrying_ = false;
  std::mutex fast_mu_;
  std::unique_ptr<LockStore> fast_;  // guarded by fast_mu_
  bool fast_closed_ = false;         // guarded by fast_mu_
};

}  // namespace

std::unique_ptr<detail::Backend> make_sqlite_backend(asio::io_context& io, SqliteConfig config) {
  return std::make_unique<SqliteBackend>(io, std::move(config));
}

}  // namespace dlock::sqlite

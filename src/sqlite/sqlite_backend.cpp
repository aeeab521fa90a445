#include "sqlite/sqlite_backend.hpp"

#include <boost/asio/post.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <vector>

#include "sqlite/host.hpp"
#include "sqlite/lock_store.hpp"
#include "sqlite/wakeups.hpp"

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

// The statements run on the I/O thread (they are local, and wait only for
// another process's write lock, which every dlock transaction holds for
// microseconds), or, for the blocking fast path, on the caller's thread
// through a second connection: a hop to the I/O thread costs more than the
// transaction when the cores are busy.
class SqliteBackend final : public detail::Backend {
 public:
  SqliteBackend(asio::io_context& io, SqliteConfig config)
      : io_(io), config_(std::move(config)), wakeups_(io, config_.path) {}

  detail::Capabilities capabilities() const override { return {}; }  // leases renewed, re-entry in the row
  void set_events(detail::BackendEvents events) override { events_ = std::move(events); }

  void start(std::function<void(Status)> done) override {
    auto store = LockStore::open(config_.path, config_.busy);
    Status s = store.status();
    if (store.ok()) {
      store_ = std::move(*store);
      s = wakeups_.open([this] { check_releases(); }, [this] { check_file(); });
      if (s.ok() && !wakeups_.inotify_status().ok() && config_.log)
        config_.log(LogLevel::warning, "sqlite: " + wakeups_.inotify_status().message());
    }
    post(std::move(done), s);
  }

  void close() override {
    closed_ = true;
    wakeups_.close();
    store_.reset();
    std::lock_guard lk(fast_mu_);
    fast_closed_ = true;
    fast_.reset();
  }

  void acquire(const AcquireCall& call, std::function<void(Result<AcquireOutcome>)> done) override {
    if (!store_) return post(std::move(done), closed());
    ++commands_;
    std::optional<ProcessId> holder;
    auto out = store_->acquire(call, &holder);
    report_gone(*store_);
    if (holder && watches_.count(call.name)) watch_holder(call.name, *holder);
    post(std::move(done), std::move(out));
  }

  void release(const ReleaseCall& call, std::function<void(Result<ReleaseOutcome>)> done) override {
    if (!store_) return post(std::move(done), closed());
    ++commands_;
    auto out = store_->release(call);
    report_gone(*store_);
    if (freed(out)) announce_release(call.name);
    post(std::move(done), std::move(out));
  }

  // Nothing of a local attempt stays behind; a grant is undone only if its
  // commit's outcome was unknown.
  void abandon(const AbandonCall& call, std::function<void(Status)> done) override {
    Status s;
    if (auto undo = detail::undo_of(call); undo && call.in_doubt) {
      if (!store_) return post(std::move(done), closed());
      ++commands_;
      auto out = store_->release(*undo);
      if (freed(out)) announce_release(call.name);
      s = out.status();
    }
    post(std::move(done), s);
  }

  void renew(const std::vector<RenewCall>& calls,
             std::function<void(Result<std::vector<RenewOutcome>>)> done) override {
    if (!store_) return post(std::move(done), Result<std::vector<RenewOutcome>>(closed()));
    ++commands_;
    auto out = store_->renew(calls);
    report_gone(*store_);
    post(std::move(done), std::move(out));
  }

  void inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) override {
    if (!store_) return post(std::move(done), Result<LockInfo>(closed()));
    ++commands_;
    post(std::move(done), store_->inspect(name));
  }

  // A failed inotify leaves the waiter its lease-capped waits (ready gets
  // the status: the caller then polls).
  void watch(const WatchKey& key, std::function<void(Status)> ready) override {
    Status s = wakeups_.listen(true);
    Watch& w = watches_[key.name];
    watched_names_.store(watches_.size());
    if (w.count++ == 0 && store_) {
      auto seen = store_->releases(key.name);
      w.releases = seen.ok() ? *seen : -1;
    }
    post(std::move(ready), s);
  }

  void unwatch(const WatchKey& key) override {
    auto it = watches_.find(key.name);
    if (it == watches_.end() || --it->second.count > 0) return;
    watches_.erase(it);
    watched_names_.store(watches_.size());
    wakeups_.forget_process(key.name);
    if (watches_.empty()) (void)wakeups_.listen(false);
  }

  // The fast path: a fresh grant or a last release on the caller's thread.
  std::optional<Result<AcquireOutcome>> acquire_now(const AcquireCall& call) override {
    std::lock_guard lk(fast_mu_);
    if (!open_fast()) return std::nullopt;
    ++commands_;
    auto out = fast_->acquire(call);
    report_gone(*fast_);
    return out;
  }

  std::optional<Result<ReleaseOutcome>> release_now(const ReleaseCall& call) override {
    std::lock_guard lk(fast_mu_);
    if (!open_fast()) return std::nullopt;
    ++commands_;
    auto out = fast_->release(call);
    report_gone(*fast_);
    if (freed(out)) {
      wakeups_.ring();  // other processes
      // This one's waiters, through the I/O thread, if there are any: a
      // watch made after this check is followed by an attempt that sees the
      // commit above.
      if (watched_names_.load() > 0)
        asio::post(io_, [this, name = call.name] { announce_release(name, false); });
    }
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

  // After the commit: this client's waiters are woken at once, other
  // processes' through the wake file.
  void announce_release(const std::string& name, bool ring = true) {
    if (closed_) return;
    if (auto it = watches_.find(name); it != watches_.end() && store_) {
      auto seen = store_->releases(name);
      if (seen.ok()) it->second.releases = *seen;
    }
    if (ring) wakeups_.ring();
    asio::post(io_, [this, name] {
      if (!closed_ && events_.released) events_.released({name, 0});
    });
  }

  // The wake file was written: which watched names saw a release? The
  // wake-ups are posted: a waiter woken may unwatch at once.
  void check_releases() {
    if (closed_ || !store_) return;
    std::vector<std::string> released;
    for (auto& [name, w] : watches_) {
      auto seen = store_->releases(name);
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
    for (auto& name : released)
      asio::post(io_, [this, name = std::move(name)] {
        if (!closed_ && events_.released) events_.released({name, 0});
      });
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
  std::map<std::string, Watch> watches_;
  std::atomic<std::size_t> watched_names_{0};  // watches_.size(), for the fast path's threads
  std::atomic<std::uint64_t> commands_{0};
  bool closed_ = false;
  std::mutex fast_mu_;
  std::unique_ptr<LockStore> fast_;  // guarded by fast_mu_
  bool fast_closed_ = false;         // guarded by fast_mu_
};

}  // namespace

std::unique_ptr<detail::Backend> make_sqlite_backend(asio::io_context& io, SqliteConfig config) {
  return std::make_unique<SqliteBackend>(io, std::move(config));
}

}  // namespace dlock::sqlite

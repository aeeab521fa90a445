#include "sqlite/sqlite_backend.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <map>
#include <vector>

#include "core/lock_row.hpp"
#include "sqlite/database.hpp"
#include "sqlite/host.hpp"
#include "sqlite/lock_table.hpp"
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

// The statements run on the I/O thread: they are local, and wait only for
// another process's write lock, which every dlock transaction holds for
// microseconds (bounded by `busy` when something else holds it longer).
class SqliteBackend final : public detail::Backend {
 public:
  SqliteBackend(asio::io_context& io, SqliteConfig config)
      : io_(io), config_(std::move(config)), wakeups_(io, config_.path) {}

  detail::Capabilities capabilities() const override {
    detail::Capabilities caps;
    caps.needs_renewal = true;
    caps.server_reentry = true;
    return caps;
  }
  void set_events(detail::BackendEvents events) override { events_ = std::move(events); }

  void start(std::function<void(Status)> done) override { post(std::move(done), open()); }

  void close() override {
    closed_ = true;
    wakeups_.close();
    table_.reset();
    db_.reset();
  }

  void acquire(const AcquireCall& call, std::function<void(Result<AcquireOutcome>)> done) override {
    post(std::move(done), in_transaction<AcquireOutcome>([&] { return apply_acquire(call); }));
  }

  void release(const ReleaseCall& call, std::function<void(Result<ReleaseOutcome>)> done) override {
    auto out = in_transaction<ReleaseOutcome>([&] { return apply_release(call); });
    if (out.ok() && out->kind == ReleaseOutcome::Kind::released && out->depth == 0) announce_release(call.name);
    post(std::move(done), std::move(out));
  }

  // Nothing of a local attempt stays in the network; a grant is undone only
  // if its commit's outcome was unknown.
  void abandon(const AbandonCall& call, std::function<void(Status)> done) override {
    Status s;
    if (call.in_doubt) {
      auto undo = detail::undo_of(call);
      auto out = in_transaction<ReleaseOutcome>([&] { return apply_release(*undo); });
      if (out.ok() && out->depth == 0 && out->kind == ReleaseOutcome::Kind::released) announce_release(call.name);
      s = out.status();
    }
    post(std::move(done), s);
  }

  void renew(const std::vector<RenewCall>& calls,
             std::function<void(Result<std::vector<RenewOutcome>>)> done) override {
    ++commands_;
    post(std::move(done), in_transaction<std::vector<RenewOutcome>>([&]() -> Result<std::vector<RenewOutcome>> {
           std::vector<RenewOutcome> out;
           const std::int64_t now = boot_ms();
           for (const RenewCall& c : calls) {
             auto stored = table_->read(c.name);
             if (!stored.ok()) return stored.status();
             out.push_back(detail::decide_renew(LockTable::live(*stored, now), c));
             if (out.back() == RenewOutcome::renewed)
               if (Status s = table_->set_expiry(c.name, now + std::min<std::int64_t>(c.lease.count(),
                                                                                      detail::kNoExpiry / 2));
                   !s.ok())
                 return s;
           }
           return out;
         }));
  }

  void inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) override {
    post(std::move(done), read_info(name));
  }

  void watch(const WatchKey& key, std::function<void(Status)> ready) override {
    Watch& w = watches_[key.name];
    if (w.count++ == 0 && table_) {
      auto seen = table_->releases(key.name);
      w.releases = seen.ok() ? *seen : -1;
    }
    post(std::move(ready), Status());
  }

  void unwatch(const WatchKey& key) override {
    auto it = watches_.find(key.name);
    if (it == watches_.end() || --it->second.count > 0) return;
    watches_.erase(it);
    wakeups_.forget_process(key.name);
  }

  std::uint64_t commands_sent() const override { return commands_; }
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

  Status open() {
    if (Status s = check_local_fs(wakeups_dir()); !s.ok()) return s;
    auto db = Database::open(config_.path, config_.busy);
    if (!db.ok()) return db.status();
    db_ = std::move(*db);
    // WAL: readers never block the writer; FULL: a granted fence survives a
    // power cut, so fences never repeat.
    if (Status s = db_->exec_retrying("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL"); !s.ok()) return s;
    auto table = LockTable::open(*db_);
    if (!table.ok()) return table.status();
    table_ = std::move(*table);
    return wakeups_.open([this] { check_releases(); });
  }

  std::string wakeups_dir() const {
    const auto slash = config_.path.rfind('/');
    return slash == 0 ? "/" : config_.path.substr(0, slash);
  }

  // Runs `body` in a write transaction; any error rolls it back.
  template <class T, class F>
  Result<T> in_transaction(F&& body) {
    if (closed_ || !table_) return Status(Errc::cancelled, "the client is closed");
    ++commands_;
    WriteTransaction tx(*db_);
    if (Status s = tx.begin(); !s.ok()) return s;
    Result<T> out = body();
    if (!out.ok()) return out;
    if (Status s = tx.commit(); !s.ok()) {
      // Refused before writing (busy): nothing happened. Any other failure
      // of a commit (I/O, disk full) may or may not have made it durable.
      if (s.code() == Errc::unavailable) return s;
      return Status(Errc::outcome_unknown, s.message(), s.backend_code());
    }
    return out;
  }

  Result<AcquireOutcome> apply_acquire(const AcquireCall& call) {
    if (Status s = detail::check_mode(call, "SQLite"); !s.ok()) return s;
    auto stored = table_->read(call.name);
    if (!stored.ok()) return stored.status();
    const std::int64_t now = boot_ms();
    Status fence_error;
    const std::int64_t expires = now + std::min<std::int64_t>(call.lease.count(), detail::kNoExpiry / 2);
    auto r = detail::decide_acquire(LockTable::live(*stored, now), call, now, expires, [&] {
      auto f = table_->next_fence();
      if (!f.ok()) fence_error = f.status();
      return f.ok() ? *f : 0;
    });
    if (!fence_error.ok()) return fence_error;
    if (r.write)
      if (Status s = table_->write(call.name, *r.write); !s.ok()) return s;
    if (r.outcome.kind == AcquireOutcome::Kind::busy && watches_.count(call.name) && stored->has_value())
      watch_holder(call.name, (*stored)->holder);
    return r.outcome;
  }

  Result<ReleaseOutcome> apply_release(const ReleaseCall& call) {
    auto stored = table_->read(call.name);
    if (!stored.ok()) return stored.status();
    auto r = detail::decide_release(LockTable::live(*stored, boot_ms()), call);
    Status s;
    if (r.write == detail::RowRelease::Write::update) s = table_->write(call.name, r.row);
    if (r.write == detail::RowRelease::Write::erase) s = table_->free(call.name);
    if (!s.ok()) return s;
    return r.outcome;
  }

  Result<LockInfo> read_info(const std::string& name) {
    if (closed_ || !table_) return Status(Errc::cancelled, "the client is closed");
    ++commands_;
    auto stored = table_->read(name);
    if (!stored.ok()) return stored.status();
    LockInfo info;
    const std::int64_t now = boot_ms();
    if (const detail::LockRow* row = LockTable::live(*stored, now)) {
      info.held = true;
      info.fence = row->fence;
      info.reentry_count = row->depth;
      info.remaining = milliseconds(row->expires_ms - now);
    }
    auto last = table_->last_fence();
    if (!last.ok()) return last.status();
    info.last_fence = *last;
    return info;
  }

  // After the commit: wake this client's waiters at once, other processes'
  // through the wake file.
  void announce_release(const std::string& name) {
    if (auto it = watches_.find(name); it != watches_.end() && table_) {
      auto seen = table_->releases(name);
      if (seen.ok()) it->second.releases = *seen;
    }
    wakeups_.ring();
    asio::post(io_, [this, name] {
      if (!closed_ && events_.released) events_.released(name);
    });
  }

  // The wake file was written: which watched names saw a release?
  // The wake-ups are posted: a waiter woken may unwatch at once.
  void check_releases() {
    if (closed_ || !table_) return;
    std::vector<std::string> released;
    for (auto& [name, w] : watches_) {
      auto seen = table_->releases(name);
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
        if (!closed_ && events_.released) events_.released(name);
      });
  }

  // A holder on this host that dies wakes the name's waiters at once.
  void watch_holder(const std::string& name, const ProcessId& holder) {
    if (holder.ns != self().ns || holder.pid == self().pid) return;
    wakeups_.watch_process(name, holder, [this, name] {
      if (!closed_ && events_.released) events_.released(name);
    });
  }

  asio::io_context& io_;
  SqliteConfig config_;
  Wakeups wakeups_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<LockTable> table_;  // over db_
  detail::BackendEvents events_;
  std::map<std::string, Watch> watches_;
  std::uint64_t commands_ = 0;
  bool closed_ = false;
};

}  // namespace

std::unique_ptr<detail::Backend> make_sqlite_backend(asio::io_context& io, SqliteConfig config) {
  return std::make_unique<SqliteBackend>(io, std::move(config));
}

}  // namespace dlock::sqlite

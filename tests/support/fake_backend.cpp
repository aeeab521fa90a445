#include "support/fake_backend.hpp"

#include <boost/asio/post.hpp>
#include <future>

namespace dlock::testing {

using detail::AbandonCall;
using detail::AcquireCall;
using detail::AcquireOutcome;
using detail::ReleaseCall;
using detail::ReleaseOutcome;
using detail::RenewCall;
using detail::RenewOutcome;
using detail::WaitHint;
using detail::WatchKey;

class FakeBackend final : public detail::Backend {
 public:
  FakeBackend(boost::asio::io_context& io, FakeServer& server) : io_(io), server_(server) {
    std::lock_guard lk(server_.mu_);
    server_.backends_.push_back(this);
  }
  ~FakeBackend() override {
    std::lock_guard lk(server_.mu_);
    std::erase(server_.backends_, this);
    ++server_.destroyed_;  // nothing touches server_ after this
  }

  detail::Capabilities capabilities() const override { return server_.caps; }
  void set_events(detail::BackendEvents events) override { events_ = std::move(events); }

  void start(std::function<void(Status)> done) override {
    post([done = std::move(done)] { done({}); });
  }
  // As the interface requires: what is outstanding fails with cancelled.
  void close() override {
    std::vector<std::function<void(bool)>> held;
    {
      std::lock_guard lk(server_.mu_);
      std::erase(server_.backends_, this);
      held.swap(server_.held_);
    }
    for (auto& h : held) h(true);
  }

  void acquire(const AcquireCall& call, std::function<void(Result<AcquireOutcome>)> done) override {
    if (server_.before_acquire) server_.before_acquire(call.name);
    std::unique_lock lk(server_.mu_);
    ++server_.acquires_;
    server_.acquire_calls_.push_back(call);
    if (auto failed = take_failure()) return post([done = std::move(done), s = *failed] { done(s); });
    Result<AcquireOutcome> out = apply_acquire(call);
    if (out.ok() && out->kind == AcquireOutcome::Kind::busy && server_.release_before_busy.exchange(false)) {
      out->hint = WaitHint::watched();  // its read set the watches, as ZooKeeper's does
      server_.locks_.erase(call.name);
      post([this, key = detail::WatchKey{call.name, call.attempt}] {
        if (events_.released) events_.released(key);
      });
    }
    if (server_.drop_ > 0) {
      --server_.drop_;
      out = Status(Errc::outcome_unknown, "fake: reply dropped");
    }
    auto reply = [this, done = std::move(done), out = std::move(out)](bool cancel) mutable {
      if (cancel) out = Status(Errc::cancelled, "fake: closed");
      post([done = std::move(done), out = std::move(out)]() mutable { done(std::move(out)); });
    };
    if (server_.hold_index_ && *server_.hold_index_ == server_.acquires_) {
      server_.hold_index_.reset();
      server_.held_.push_back(std::move(reply));
      return;
    }
    lk.unlock();
    reply(false);
  }

  void release(const ReleaseCall& call, std::function<void(Result<ReleaseOutcome>)> done) override {
    std::lock_guard lk(server_.mu_);
    ++server_.releases_;
    if (auto failed = take_failure()) return post([done = std::move(done), s = *failed] { done(s); });
    Result<ReleaseOutcome> out = apply_release(call);
    if (server_.drop_release_ > 0) {
      --server_.drop_release_;
      out = Status(Errc::outcome_unknown, "fake: reply dropped");
    }
    post([done = std::move(done), out = std::move(out)] { done(out); });
  }

  std::optional<Result<AcquireOutcome>> acquire_now(const AcquireCall& call) override {
    if (!server_.fast_path) return std::nullopt;
    std::unique_lock lk(server_.mu_);
    ++server_.acquires_;
    server_.acquire_calls_.push_back(call);
    if (auto failed = take_failure()) return Result<AcquireOutcome>(*failed);
    Result<AcquireOutcome> out = apply_acquire(call);
    if (server_.during_acquire_now) server_.during_acquire_now();
    lk.unlock();
    if (server_.after_acquire_now) server_.after_acquire_now();
    return out;
  }

  std::optional<Result<ReleaseOutcome>> release_now(const ReleaseCall& call) override {
    if (!server_.fast_path || !server_.release_now_offered) return std::nullopt;
    if (server_.before_release_now) server_.before_release_now();
    std::lock_guard lk(server_.mu_);
    ++server_.releases_;
    if (auto failed = take_failure()) return Result<ReleaseOutcome>(*failed);
    return Result<ReleaseOutcome>(apply_release(call));
  }

  void abandon(const AbandonCall& call, std::function<void(Status)> done) override {
    std::lock_guard lk(server_.mu_);
    server_.abandons_.push_back(call);
    if (server_.hold_abandons_) {  // applied at flush(); never, if the client closes first
      server_.held_.push_back([this, call, done = std::move(done)](bool cancel) mutable {
        if (!cancel) {
          std::lock_guard again(server_.mu_);
          apply_abandon(call);
        }
        post([done = std::move(done), cancel] { done(cancel ? Status(Errc::cancelled, "fake: closed") : Status()); });
      });
      return;
    }
    apply_abandon(call);
    post([done = std::move(done)] { done({}); });
  }

  // REQUIRES: server_.mu_ held.
  void apply_abandon(const AbandonCall& call) {
    // A tombstone lives in the line's state (as in SQLite's line table).
    if (server_.lines_.count(call.name) != 0 || call.line || call.tombstone.count() > 0) {
      auto& st = server_.line(call.name);
      server_.hand_over(call.name, detail::line_abandon(st, call, FakeServer::steady_ms(), next_fence()));
    } else if (auto undo = detail::undo_of(call)) {
      (void)apply_release(*undo);
    }
  }

  void renew(const std::vector<RenewCall>& calls,
             std::function<void(Result<std::vector<RenewOutcome>>)> done) override {
    std::lock_guard lk(server_.mu_);
    ++server_.renewals_;
    if (server_.fail_renewals_)
      return post([done = std::move(done)] { done(Status(Errc::unavailable, "fake: renewals fail")); });
    std::vector<RenewOutcome> out;
    for (const RenewCall& c : calls) {
      if (c.line || server_.lines_.count(c.name) != 0) {
        out.push_back(detail::line_renew(server_.line(c.name), c, FakeServer::steady_ms()));
        continue;
      }
      FakeServer::Lock* l = server_.live(c.name);
      out.push_back(detail::decide_renew(l, c));
      if (out.back() == RenewOutcome::renewed) l->expires_ms = FakeServer::steady_ms() + c.lease.count();
    }
    post([done = std::move(done), out = std::move(out)] { done(out); });
  }

  void inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) override {
    std::lock_guard lk(server_.mu_);
    LockInfo info;
    if (server_.lines_.count(name) != 0) {
      auto& st = server_.line(name);
      auto handed = detail::line_settle(st, FakeServer::steady_ms(), next_fence());
      info = detail::line_info(st, FakeServer::steady_ms());
      server_.hand_over(name, handed);  // may forget an empty line: st is not used after it
    } else if (const FakeServer::Lock* l = server_.live(name)) {
      info.held = true;
      info.holders = 1;
      info.fence = l->fence;
      info.reentry_count = l->depth;
      info.holder = l->info;
      if (l->granted_ms > 0)
        info.held_for = std::chrono::milliseconds(std::max<std::int64_t>(FakeServer::steady_ms() - l->granted_ms, 0));
      if (l->expires_ms != detail::kNoExpiry)
        info.remaining = std::chrono::milliseconds(l->expires_ms - FakeServer::steady_ms());
    }
    info.last_fence = server_.fence_;
    post([done = std::move(done), info] { done(info); });
  }

  void names(const std::string& prefix, std::function<void(Result<std::vector<std::string>>)> done) override {
    std::lock_guard lk(server_.mu_);
    std::vector<std::string> out;
    for (const auto& [name, lock] : server_.locks_)
      if (name.starts_with(prefix)) out.push_back(name);
    for (const auto& [name, line] : server_.lines_)
      if (name.starts_with(prefix)) out.push_back(name);
    post([done = std::move(done), out = std::move(out)] { done(out); });
  }

  void watch(const WatchKey& key, std::function<void(Status)> ready) override {
    std::lock_guard lk(server_.mu_);
    server_.watches_.push_back(key);
    ++server_.watching_[key.name];
    Status s = server_.refuse_watches_ ? Status(Errc::permission_denied, "fake: watches refused") : Status();
    post([ready = std::move(ready), s] { ready(s); });
  }
  void unwatch(const WatchKey& key) override {
    std::lock_guard lk(server_.mu_);
    if (--server_.watching_[key.name] == 0) server_.watching_.erase(key.name);
  }

  // Every call the server took (from every client of it: tests of this
  // counter use one).
  std::uint64_t commands_sent() const override {
    return static_cast<std::uint64_t>(server_.acquires() + server_.releases() + server_.renewals());
  }
  std::uint64_t reconnects() const override { return 0; }

  // Called with server_.mu_ held, from any thread.
  template <class F>
  void post(F&& f) {
    boost::asio::post(io_, std::forward<F>(f));
  }
  void publish(const std::string& name) {
    post([this, name] {
      if (events_.released) events_.released({name, 0});
    });
  }
  void changed(const std::string& name) {
    post([this, name] {
      if (events_.changed) events_.changed(name);
    });
  }
  void publish(const detail::HandOver& to) {
    post([this, to] {
      if (events_.handed) events_.handed(to);
    });
  }
  const detail::BackendEvents& events() const { return events_; }

 private:
  std::optional<Status> take_failure() {
    if (server_.fail_ == 0) return std::nullopt;
    --server_.fail_;
    return server_.fail_status_;
  }

  detail::NextFence next_fence() {
    return [this] { return ++server_.fence_; };
  }

  // The lease-row decisions every row backend shares (core/lock_row), and
  // the line's (core/lock_line) for fair, shared and counted locks.
  Result<AcquireOutcome> apply_acquire(const AcquireCall& c) {
    const std::int64_t now = FakeServer::steady_ms();
    if (c.queued || c.mode == detail::LockMode::shared || server_.lines_.count(c.name) != 0) {
      if (!server_.caps.lines) return Status(detail::check_mode(c, "fake", "capabilities say no lines"));
      auto r = detail::line_acquire(server_.line(c.name), c, now, next_fence());
      server_.hand_over(c.name, r.handed);
      if (r.error.ok() && r.outcome.kind == AcquireOutcome::Kind::granted && c.held == 0)
        server_.each_backend([&](FakeBackend* b) { b->changed(c.name); });
      if (!r.error.ok()) return r.error;
      return r.outcome;
    }
    // A session keeps its holds; a lease expires unless renewed.
    const std::int64_t expires = server_.caps.needs_renewal ? now + c.lease.count() : detail::kNoExpiry;
    auto r = detail::decide_acquire(server_.live(c.name), c, now, expires, [this] { return ++server_.fence_; });
    if (r.write) server_.locks_[c.name] = std::move(*r.write);
    return r.outcome;
  }

  ReleaseOutcome apply_release(const ReleaseCall& c) {
    if (server_.lines_.count(c.name) != 0 || c.tombstone.count() > 0) {
      auto r = detail::line_release(server_.line(c.name), c, FakeServer::steady_ms(), next_fence());
      server_.hand_over(c.name, r.handed);
      return r.outcome;
    }
    auto r = detail::decide_release(server_.live(c.name), c);
    if (r.write == detail::RowRelease::Write::update) server_.locks_[c.name] = r.row;
    if (r.write == detail::RowRelease::Write::erase) {
      server_.locks_.erase(c.name);
      server_.publish(c.name);
    }
    return r.outcome;
  }

  boost::asio::io_context& io_;
  FakeServer& server_;
  detail::BackendEvents events_;
};

void FakeServer::drop_acquire_replies(int n) {
  std::lock_guard lk(mu_);
  drop_ = n;
}
void FakeServer::drop_release_replies(int n) {
  std::lock_guard lk(mu_);
  drop_release_ = n;
}
void FakeServer::hold_acquire_reply(int index) {
  std::lock_guard lk(mu_);
  hold_index_ = index;
}
void FakeServer::hold_abandons(bool on) {
  std::lock_guard lk(mu_);
  hold_abandons_ = on;
}
void FakeServer::flush() {
  std::vector<std::function<void(bool)>> held;
  {
    std::lock_guard lk(mu_);
    held.swap(held_);
  }
  for (auto& f : held) f(false);
}
void FakeServer::fail_calls(int n, Status status) {
  std::lock_guard lk(mu_);
  fail_ = n;
  fail_status_ = std::move(status);
}
void FakeServer::fail_renewals(bool on) {
  std::lock_guard lk(mu_);
  fail_renewals_ = on;
}
void FakeServer::refuse_watches(bool on) {
  std::lock_guard lk(mu_);
  refuse_watches_ = on;
}
void FakeServer::set_holder_ttl(std::optional<std::chrono::milliseconds> ttl) {
  std::lock_guard lk(mu_);
  ttl_ = ttl;
}
void FakeServer::take(const std::string& name) {
  std::lock_guard lk(mu_);
  locks_[name] = {"other", 1, 1, ++fence_, ttl_ ? steady_ms() + ttl_->count() : detail::kNoExpiry, 0, {}};
}

void FakeServer::queue_ghost(const std::string& name, std::chrono::milliseconds lease) {
  std::lock_guard lk(mu_);
  detail::LineState& st = line(name);
  st.line.push_back(
      {"ghost", 1, detail::LockMode::exclusive, st.next_ticket++, lease.count(), steady_ms() + lease.count(), ""});
}

std::int64_t FakeServer::steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

FakeServer::Lock* FakeServer::live(const std::string& name) {
  auto it = locks_.find(name);
  if (it == locks_.end()) return nullptr;
  if (it->second.expires_ms <= steady_ms()) {
    locks_.erase(it);
    return nullptr;
  }
  return &it->second;
}
template <class F>
void FakeServer::each_backend(F f) {
  for (FakeBackend* b : backends_) f(b);
}
void FakeServer::publish(const std::string& name) {
  each_backend([&](FakeBackend* b) { b->publish(name); });
}
detail::LineState& FakeServer::line(const std::string& name) {
  auto& st = lines_[name];
  if (Lock* l = live(name)) {
    st.holders.push_back(
        {l->owner, l->grant, detail::LockMode::exclusive, l->depth, l->fence, l->expires_ms, l->info, l->granted_ms});
    locks_.erase(name);
  }
  return st;
}
// Tells the granted waiters, and everyone that the name changed hands (an
// observer's wake-up); a line with nobody left publishes a plain release.
void FakeServer::hand_over(const std::string& name, const std::vector<detail::Handed>& to) {
  auto it = lines_.find(name);
  for (const auto& h : to)
    each_backend([&](FakeBackend* b) {
      b->publish(detail::HandOver{name, h.owner, h.grant, h.fence, std::chrono::milliseconds(h.lease_ms)});
    });
  if (it != lines_.end() && it->second.holders.empty()) publish(name);
  if (it != lines_.end() && it->second.empty()) lines_.erase(it);
}
void FakeServer::drop(const std::string& name, bool publish_it) {
  std::lock_guard lk(mu_);
  locks_.erase(name);
  if (publish_it) publish(name);
}
bool FakeServer::drop_hold(const std::string& name, std::uint64_t fence) {
  std::lock_guard lk(mu_);
  auto it = lines_.find(name);
  if (it == lines_.end()) return false;
  return std::erase_if(it->second.holders, [&](const detail::LineHolder& h) { return h.fence == fence; }) > 0;
}
void FakeServer::link(bool up) {
  std::lock_guard lk(mu_);
  each_backend([up](FakeBackend* b) {
    b->post([b, up] {
      if (b->events().link) b->events().link(up);
    });
  });
}
void FakeServer::session_lost(LossReason reason) {
  std::lock_guard lk(mu_);
  locks_.clear();  // the session's holds are gone on the server too
  lines_.clear();
  each_backend([reason](FakeBackend* b) {
    b->post([b, reason] {
      if (b->events().lost) b->events().lost({}, reason);
    });
  });
}
void FakeServer::lost_delivered(std::vector<detail::HoldRef> holds, LossReason reason) {
  std::vector<std::future<void>> told;
  {
    std::lock_guard lk(mu_);
    if (holds.empty()) {
      locks_.clear();
      lines_.clear();
    }
    each_backend([&told, &holds, reason](FakeBackend* b) {
      auto done = std::make_shared<std::promise<void>>();
      told.push_back(done->get_future());
      b->post([b, holds, reason, done] {
        if (b->events().lost) b->events().lost(holds, reason);
        done->set_value();
      });
    });
  }
  for (auto& f : told) f.wait();
}
void FakeServer::alive_until(std::chrono::steady_clock::time_point until) {
  std::lock_guard lk(mu_);
  each_backend([until](FakeBackend* b) {
    b->post([b, until] {
      if (b->events().alive_until) b->events().alive_until(until);
    });
  });
}

std::optional<FakeServer::Lock> FakeServer::lock(const std::string& name) {
  std::lock_guard lk(mu_);
  if (const Lock* l = live(name)) return *l;
  if (auto it = lines_.find(name); it != lines_.end())
    for (const auto& h : it->second.holders)
      if (h.mode == detail::LockMode::exclusive && h.expires_ms > steady_ms())
        return Lock{h.owner, h.grant, h.depth, h.fence, h.expires_ms, 0, {}};
  return std::nullopt;
}
int FakeServer::acquires() {
  std::lock_guard lk(mu_);
  return acquires_;
}
int FakeServer::releases() {
  std::lock_guard lk(mu_);
  return releases_;
}
int FakeServer::renewals() {
  std::lock_guard lk(mu_);
  return renewals_;
}
int FakeServer::held_replies() {
  std::lock_guard lk(mu_);
  return static_cast<int>(held_.size());
}
std::vector<detail::AbandonCall> FakeServer::abandons() {
  std::lock_guard lk(mu_);
  return abandons_;
}
std::vector<detail::AcquireCall> FakeServer::acquire_calls() {
  std::lock_guard lk(mu_);
  return acquire_calls_;
}
int FakeServer::backends_destroyed() {
  std::lock_guard lk(mu_);
  return destroyed_;
}
std::vector<detail::WatchKey> FakeServer::watches() {
  std::lock_guard lk(mu_);
  return watches_;
}

std::function<std::unique_ptr<detail::Backend>(boost::asio::io_context&)> FakeServer::maker() {
  return [this](boost::asio::io_context& io) { return std::make_unique<FakeBackend>(io, *this); };
}

}  // namespace dlock::testing

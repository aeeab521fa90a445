#include "client_core.hpp"

#include <boost/asio/post.hpp>

#include <cstdio>
#include <future>
#include <iostream>

#include "core/keys.hpp"
#include "core/token.hpp"
#include "core/transient.hpp"
#include "core/url.hpp"
#include "redis/redis_backend.hpp"
#include "redlock/redlock_backend.hpp"

namespace dlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
// To the logger, else warnings and errors to stderr. A throwing logger must
// not take the I/O thread down.
void emit(const Logger& logger, LogLevel level, const std::string& message) {
  if (logger) {
    try {
      logger(level, message);
    } catch (...) {
    }
    return;
  }
  if (level == LogLevel::warning || level == LogLevel::error) std::cerr << "dlock: " << message << '\n';
}

// Runs the I/O loop; it sleeps in epoll whenever there is nothing to do. It
// never spins: on a busy machine spinning steals the time slices that the
// server and the application need, and blocking calls do not hop through
// this thread anyway (acquire_now / release_now).
void run_io(boost::asio::io_context& io) {
  while (!io.stopped()) io.run();
}

// Renewal scripts are split so one script never blocks Redis for long.
constexpr std::size_t kRenewBatch = 1000;

std::int64_t ticks(std::chrono::steady_clock::time_point t) { return t.time_since_epoch().count(); }

Status check_options(const ClientOptions& o) {
  if (o.connect_timeout.count() <= 0) return {Errc::invalid_argument, "connect_timeout must be > 0"};
  if (o.command_timeout.count() <= 0) return {Errc::invalid_argument, "command_timeout must be > 0"};
  if (o.reconnect_backoff_min.count() <= 0 || o.reconnect_backoff_max < o.reconnect_backoff_min)
    return {Errc::invalid_argument, "reconnect backoff must satisfy 0 < min <= max"};
  if (o.wait_replicas < 0) return {Errc::invalid_argument, "wait_replicas must be >= 0"};
  if (o.wait_replicas > 0 && o.wait_timeout.count() <= 0)
    return {Errc::invalid_argument, "wait_timeout must be > 0 ms"};
  return {};
}

Status check_lease(const char* field, milliseconds lease) {
  if (lease < kMinLease || lease > kMaxLease)
    return {Errc::invalid_argument, std::string(field) + " must be between " + std::to_string(kMinLease.count()) +
                                        " ms and " + std::to_string(kMaxLease.count()) + " ms (got " +
                                        std::to_string(lease.count()) + " ms)"};
  return {};
}

Status check_lock_options(const LockOptions& o, milliseconds wait) {
  if (wait.count() < 0) return {Errc::invalid_argument, "wait must be >= 0 ms"};
  if (o.lease) {
    if (Status s = check_lease("lease", *o.lease); !s.ok()) return s;
  } else {
    if (Status s = check_lease("watchdog_lease", o.watchdog_lease); !s.ok()) return s;
    if (o.renew_interval.count() <= 0 || o.renew_interval >= o.watchdog_lease)
      return {Errc::invalid_argument, "renew_interval must be > 0 and below watchdog_lease"};
  }
  if (o.error_retry.count() < 0) return {Errc::invalid_argument, "error_retry must be >= 0 ms"};
  return {};
}
// What a release's answer means for the caller: the depth left here and the
// status to report. After a retry, "gone" is what our first attempt did.
std::pair<unsigned, Status> release_result(const Result<ReleaseOutcome>& r, unsigned held, int tries,
                                           const std::string& name) {
  if (!r.ok()) return {held - 1, r.status()};
  switch (r->kind) {
    case ReleaseOutcome::Kind::released: return {r->depth, Status()};
    case ReleaseOutcome::Kind::not_held:
      return {held - 1, tries > 0 ? Status()
                                  : Status(Errc::not_held, "lock '" + name + "' was not held: the lease expired first")};
    case ReleaseOutcome::Kind::not_owner:
      return {held - 1, tries > 0 ? Status()
                                  : Status(Errc::not_owner, "lock '" + name +
                                                                "' is held by another owner (this lease had "
                                                                "expired); nothing was touched")};
    case ReleaseOutcome::Kind::mismatch: break;
  }
  return {held - 1, Status(Errc::server_error, "re-entry depth on the server differs from this client's")};
}
}  // namespace

struct ClientCore::Runtime {
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::thread thread;
};

struct ClientCore::AcquireOp {
  AcquireOp(asio::io_context& io, Clock::time_point now, milliseconds wait, milliseconds retry)
      : fsm(now, wait, retry), timer(io) {}
  std::string name;
  LockOptions opts;
  milliseconds lease{0};
  milliseconds interval{0};
  bool renew = true;
  std::shared_ptr<Hold> hold;
  AcquireFsm fsm;
  asio::steady_timer timer;
  std::function<void(Result<Lease>)> done;
  bool in_waiters = false;
  bool watching = false;
  bool woken = false;  // a release notification was handed to this op
  bool finished = false;
  std::uint64_t attempt_epoch = 0;
  std::uint64_t fresh_grant = 0;  // the grant id this op asks for when not re-entering
  // The last attempt sent: its depth and grant (for an undo), and whether it
  // is still unanswered.
  unsigned sent_held = 0;
  std::uint64_t sent_grant = 0;
  bool in_flight = false;
  bool stray = false;  // a fresh attempt's reply was lost: a copy may still arrive
};

ClientCore::ClientCore(ClientOptions options)
    : options_(std::move(options)), rt_(std::make_shared<Runtime>()), next_grant_(random_u64() | 1) {}

template <class F>
void ClientCore::post(F&& f) {
  asio::post(rt_->io, std::forward<F>(f));
}

void ClientCore::log(LogLevel level, const std::string& message) const { emit(options_.logger, level, message); }

Result<std::shared_ptr<ClientCore>> ClientCore::connect(std::string_view url, ClientOptions options) {
  if (Status s = check_options(options); !s.ok()) return s;
  // redlock:// names several independent masters; redis:// one.
  const bool redlock = is_redlock_url(url);
  std::vector<RedisEndpoint> endpoints;
  if (redlock) {
    if (options.wait_replicas > 0)
      return Status(Errc::invalid_argument, "wait_replicas applies to redis:// masters with replicas, not Redlock");
    auto eps = parse_redlock_url(url);
    if (!eps.ok()) return eps.status();
    endpoints = std::move(*eps);
  } else {
    auto ep = parse_redis_url(url);
    if (!ep.ok()) return ep.status();
    // The URL's WAIT parameters fill in options left at their defaults.
    const ClientOptions defaults;
    if (ep->wait_replicas && options.wait_replicas == defaults.wait_replicas) options.wait_replicas = *ep->wait_replicas;
    if (ep->wait_timeout_ms && options.wait_timeout == defaults.wait_timeout)
      options.wait_timeout = milliseconds(*ep->wait_timeout_ms);
    if (Status s = check_options(options); !s.ok()) return s;
    endpoints.push_back(std::move(*ep));
  }
  for (RedisEndpoint& ep : endpoints) {
    if (!options.username.empty()) ep.username = options.username;
    if (!options.password.empty()) ep.password = options.password;
    if (!ep.username.empty() && ep.password.empty())
      return Status(Errc::invalid_argument, "a user name needs a password");
  }

  std::shared_ptr<ClientCore> core(new ClientCore(std::move(options)));
  auto alive = core->alive_;
  ClientCore* raw = core.get();
  std::vector<redis::ConnectionConfig> configs;
  for (RedisEndpoint& ep : endpoints) {
    redis::ConnectionConfig cfg;
    cfg.endpoint = std::move(ep);
    cfg.connect_timeout = core->options_.connect_timeout;
    cfg.command_timeout = core->options_.command_timeout;
    cfg.backoff_min = core->options_.reconnect_backoff_min;
    cfg.backoff_max = core->options_.reconnect_backoff_max;
    cfg.log = [raw, alive](LogLevel level, std::string_view msg) {
      if (*alive) raw->log(level, std::string(msg));
    };
    configs.push_back(std::move(cfg));
  }
  if (redlock)
    core->backend_ = redlock::make_redlock_backend(core->rt_->io, std::move(configs), core->options_.key_prefix,
                                                   core->options_.command_timeout);
  else
    core->backend_ = redis::make_redis_backend(core->rt_->io, std::move(configs.front()), core->options_.key_prefix,
                                               {core->options_.wait_replicas, core->options_.wait_timeout});
  core->backend_->set_wake_handlers(
      [raw, alive](const std::string& name) {
        if (*alive) raw->on_release_published(name);
      },
      [raw, alive] {
        if (*alive) raw->wake_all();
      });
  core->backend_->set_link_handler([raw, alive](bool up) {
    if (!*alive || up) return;
    raw->scheduler_.link_down(Clock::now());
    raw->rearm_renewal();
  });
  core->renew_timer_ = std::make_unique<asio::steady_timer>(core->rt_->io);
  auto rt = core->rt_;
  // A callback that throws must not take the process down with the I/O
  // thread: report it and keep serving.
  rt->thread = std::thread([rt, logger = core->options_.logger] {
    for (;;) {
      try {
        run_io(rt->io);
        return;
      } catch (const std::exception& e) {  // *this may be gone: no log()
        emit(logger, LogLevel::error, std::string("a callback threw on the I/O thread: ") + e.what());
      } catch (...) {
        emit(logger, LogLevel::error, "a callback threw on the I/O thread");
      }
    }
  });
  core->io_thread_id_ = rt->thread.get_id();

  std::promise<Status> started;
  auto fut = started.get_future();
  core->post([raw, &started] { raw->backend_->start([&started](Status s) { started.set_value(std::move(s)); }); });
  Status s = fut.get();
  if (!s.ok()) return s;  // ~ClientCore closes and joins
  core->backend_->open_blocking();
  return core;
}

ClientCore::~ClientCore() { shutdown(); }

// Frees every lock still held (one round trip, bounded by the command
// timeout), fails waiting acquires with cancelled, then stops the I/O
// thread. Safe on any thread, including the I/O thread itself (the last
// handle dropped inside a callback): then the thread is detached and winds
// down on its own, touching nothing of *this.
void ClientCore::shutdown() {
  if (!rt_) return;
  auto rt = std::move(rt_);
  auto body = [this, rt] {
    adopt_staged();
    closing_ = true;
    *alive_ = false;
    renew_timer_.reset();  // timers must die before their io_context
    waiters_.clear();
    std::vector<ReleaseCall> calls;
    for (auto& [key, hold] : holds_) {
      if (hold->depth.load() > 0 && !hold->lost.load()) {
        ReleaseCall c{hold->name, hold->owner, hold->depth.load(), true};
        c.grant = hold->grant;
        if (hold->stray) c.tombstone = hold->lease;
        calls.push_back(std::move(c));
      }
      hold->lost.store(true);
      hold->lost_source.request_stop();
      hold->depth.store(0);
    }
    holds_.clear();
    // Every acquire still running completes with cancelled; one whose request
    // is out is undone behind it on the same connection (it may be granted).
    auto ops = std::move(live_ops_);
    live_ops_.clear();
    for (const auto& op : ops) {
      op->finished = true;
      op->timer.cancel();
      if (op->in_flight || op->stray) {
        ReleaseCall c{op->name, op->hold->owner, op->sent_held + 1, false};
        c.grant = op->sent_grant;
        if (op->sent_held == 0) c.tombstone = op->lease;
        calls.push_back(std::move(c));
      }
      asio::post(rt->io, [done = std::move(op->done)]() mutable {
        if (done) done(Status(Errc::cancelled, "client closed during the acquire"));
      });
    }
    std::shared_ptr<Backend> backend(std::move(backend_));
    if (!backend) {
      rt->work.reset();
      return;
    }
    backend->set_wake_handlers(nullptr, nullptr);
    backend->set_link_handler(nullptr);
    auto remaining = std::make_shared<std::size_t>(calls.size());
    auto finalize = std::make_shared<std::function<void()>>();
    auto timer = std::make_shared<asio::steady_timer>(rt->io, options_.command_timeout);
    *finalize = [backend, rt, timer, finalize]() mutable {
      if (!*finalize) return;
      timer->cancel();
      auto self = std::move(*finalize);  // run once; breaks the cycle
      *finalize = nullptr;
      asio::post(rt->io, [backend, rt] {
        backend->close();
        rt->work.reset();
      });
    };
    for (const ReleaseCall& c : calls) {
      backend->release(c, [remaining, finalize](Result<ReleaseOutcome>) {
        if (--*remaining == 0 && *finalize) (*finalize)();
      });
    }
    if (calls.empty()) (*finalize)();
    else
      timer->async_wait([finalize](const error_code& ec) {
        if (!ec && *finalize) (*finalize)();
      });
  };
  if (std::this_thread::get_id() == rt->thread.get_id()) {
    body();
    rt->thread.detach();
  } else {
    asio::post(rt->io, body);
    rt->thread.join();
  }
}

std::shared_ptr<Hold> ClientCore::find_or_add_hold(const std::string& name, const std::string& owner) {
  auto& slot = holds_[{name, owner}];
  if (!slot) slot = std::make_shared<Hold>(name, owner);
  return slot;
}

void ClientCore::maybe_forget(const std::shared_ptr<Hold>& hold) {
  if (hold->depth.load() != 0 || hold->users != 0 || hold->op_busy || !hold->ops.empty()) return;
  auto it = holds_.find({hold->name, hold->owner});
  if (it != holds_.end() && it->second == hold) holds_.erase(it);
}

// Script calls of one owner on one lock go out one at a time: each carries
// the depth the owner holds, which must not change under it.
void ClientCore::hold_exec(const std::shared_ptr<Hold>& hold, std::function<void()> op) {
  hold->fast.store(false);  // from now on its calls are ordered here
  hold->ops.push_back(std::move(op));
  if (!hold->op_busy) run_next_op(hold);
}

void ClientCore::hold_op_done(const std::shared_ptr<Hold>& hold) {
  hold->op_busy = false;
  if (hold->ops.empty()) maybe_forget(hold);
  else run_next_op(hold);
}

// REQUIRES: !hold->op_busy and ops not empty.
void ClientCore::run_next_op(const std::shared_ptr<Hold>& hold) {
  hold->op_busy = true;
  auto next = std::move(hold->ops.front());
  hold->ops.erase(hold->ops.begin());
  next();
}

void ClientCore::acquire(std::string name, milliseconds wait, LockOptions options,
                         std::function<void(Result<Lease>)> done, AcquireSeed seed) {
  Status bad = validate_name(name);
  if (bad.ok()) bad = check_lock_options(options, wait);
  if (bad.ok() && !options.owner.empty()) bad = validate_owner(options.owner);
  if (!bad.ok()) {
    post([done = std::move(done), bad]() mutable { done(bad); });
    return;
  }
  if (options.owner.empty()) options.owner = random_token();
  post([self = shared_from_this(), name = std::move(name), wait, options = std::move(options),
        done = std::move(done), seed]() mutable {
    if (self->closing_) return done(Status(Errc::cancelled, "client closed"));
    self->adopt_staged();
    auto op = std::make_shared<AcquireOp>(self->rt_->io, Clock::now(), wait, options.error_retry);
    op->name = std::move(name);
    op->renew = !options.lease.has_value();
    op->lease = options.lease.value_or(options.watchdog_lease);
    op->interval = op->renew ? options.renew_interval : op->lease;
    op->opts = std::move(options);
    op->done = std::move(done);
    op->hold = self->find_or_add_hold(op->name, op->opts.owner);
    op->fresh_grant = seed.grant != 0 ? seed.grant : self->next_grant_.fetch_add(1);
    op->stray = seed.stray;
    ++op->hold->users;
    self->live_ops_.insert(op);
    // A fast attempt that failed counts as this acquire's first failure (so
    // error_retry bounds the whole call, as documented).
    if (!seed.error.ok()) {
      op->sent_grant = op->fresh_grant;
      return self->step(op, op->fsm.on_error(Clock::now(), seed.error));
    }
    self->step(op, op->fsm.start());
  });
}

void ClientCore::step(const std::shared_ptr<AcquireOp>& op, AcquireFsm::Action action) {
  using Kind = AcquireFsm::Action::Kind;
  switch (action.kind) {
    case Kind::attempt:
      send_attempt(op);
      return;
    case Kind::watch: {
      if (!op->in_waiters) {
        waiters_[op->name].push_back(op);
        op->in_waiters = true;
      }
      op->watching = true;
      auto alive = alive_;
      if (action.until != AcquireFsm::time_point::max()) {
        op->timer.expires_at(action.until);
        op->timer.async_wait([this, alive, op](const error_code& ec) {
          if (ec || !*alive || op->finished) return;
          step(op, op->fsm.on_wake(Clock::now()));
        });
      }
      backend_->watch(op->name, [this, alive, op](Status s) {
        if (!*alive || op->finished) return;
        op->timer.cancel();
        if (!s.ok() && s.code() != Errc::cancelled && !std::exchange(warned_blind_, true))
          log(LogLevel::warning, "waiting for locks without release notifications (polling; said once): " +
                                     s.to_string());
        step(op, op->fsm.on_watch_ready(Clock::now(), s.ok()));
      });
      return;
    }
    case Kind::wait: {
      op->timer.expires_at(action.until);
      auto alive = alive_;
      op->timer.async_wait([this, alive, op](const error_code& ec) {
        if (ec || !*alive || op->finished) return;
        step(op, op->fsm.on_wake(Clock::now()));
      });
      return;
    }
    case Kind::done:
      finish(op, action.status);
      return;
    case Kind::none:
      return;
  }
}

void ClientCore::send_attempt(const std::shared_ptr<AcquireOp>& op) {
  auto alive = alive_;
  hold_exec(op->hold, [this, alive, op] {
    if (!*alive) return;
    if (op->finished) return hold_op_done(op->hold);
    if (op->hold->depth.load() > 0 && op->hold->lost.load()) {
      // A re-entry on a hold already reported lost: never granted.
      hold_op_done(op->hold);
      return step(op, op->fsm.on_lost());
    }
    AcquireCall call{op->name, op->hold->owner, op->lease, op->hold->depth.load()};
    call.grant = call.held > 0 ? op->hold->grant : op->fresh_grant;
    op->sent_held = call.held;
    op->sent_grant = call.grant;
    op->in_flight = true;
    const auto sent_at = Clock::now();
    op->attempt_epoch = release_epoch_[op->name];
    backend_->acquire(call, [this, alive, op, sent_at](Result<AcquireOutcome> r) {
      if (!*alive) return;
      op->in_flight = false;
      hold_op_done(op->hold);
      if (op->finished) return;
      const auto now = Clock::now();
      if (!r.ok() && r.code() == Errc::outcome_unknown && op->sent_held == 0) op->stray = true;
      if (!r.ok()) return step(op, op->fsm.on_error(now, r.status()));
      switch (r->kind) {
        case AcquireOutcome::Kind::granted:
          // A grant whose reply came back after its validity (the client
          // was paused, the reply was held up) is no grant: the key may
          // already have expired and been given to someone else. Undo it
          // with the idempotent release and try again within the wait.
          if (op->hold->depth.load() == 0 &&
              now >= sent_at + op->lease - RenewalScheduler::drift(op->lease)) {
            late_grants_.fetch_add(1, std::memory_order_relaxed);
            // No tombstone: this op may still be granted under the same id.
            cleanup_in_doubt(op->hold, op->sent_held, op->sent_grant, milliseconds(0));
            const auto late_ms = std::chrono::duration_cast<milliseconds>(now - sent_at).count();
            return step(op, op->fsm.on_error(now, Status(Errc::unavailable,
                                                         "the grant's reply arrived " + std::to_string(late_ms) +
                                                             " ms after the request, past the lease's validity; "
                                                             "it was released")));
          }
          (void)op->fsm.on_granted();
          return granted(op, *r, sent_at);
        case AcquireOutcome::Kind::busy: {
          auto action = op->fsm.on_busy(now, r->holder_ttl);
          // A release published while the attempt was in flight would
          // otherwise be slept through until the holder's TTL.
          if (action.kind == AcquireFsm::Action::Kind::wait && release_epoch_[op->name] != op->attempt_epoch)
            action = op->fsm.on_wake(now);
          return step(op, action);
        }
        case AcquireOutcome::Kind::lost:
          mark_lost(op->hold, LossReason::expired);
          return step(op, op->fsm.on_lost());
        case AcquireOutcome::Kind::mismatch:
          return step(op, op->fsm.on_error(now, Status(Errc::server_error,
                                                       "re-entry depth on the server differs from this client's: "
                                                       "the owner id is used by another client")));
      }
    });
  });
}

void ClientCore::granted(const std::shared_ptr<AcquireOp>& op, const AcquireOutcome& outcome,
                         Clock::time_point sent_at) {
  Hold& h = *op->hold;
  const bool fresh = h.depth.load() == 0;
  h.fence.store(outcome.fence);
  h.depth.store(outcome.depth);
  if (fresh) {
    h.grant = op->sent_grant;
    h.stray = op->stray;
    h.lost.store(false);
    h.lost_source = std::stop_source();
    h.on_lost = op->opts.on_lost;
    h.lease = op->lease;
    h.id = next_id_++;
    scheduled_[h.id] = op->hold;
    scheduler_.add(h.id, sent_at, op->lease, op->interval, op->renew);
    h.valid_until_ns.store(ticks(scheduler_.valid_until(h.id)));
    leases_held_.fetch_add(1, std::memory_order_relaxed);
    rearm_renewal();
  }
  grants_.fetch_add(1, std::memory_order_relaxed);
  Lease lease(weak_from_this(), op->hold);
  op->woken = false;
  finish(op, Status());
  // Waiters of the same owner can now re-enter: they would otherwise sleep
  // until a release that this grant's own holder will not publish soon.
  if (auto it = waiters_.find(op->name); it != waiters_.end()) {
    std::vector<std::shared_ptr<AcquireOp>> same;
    for (const auto& w : it->second)
      if (w->hold == op->hold) same.push_back(w);
    const auto now = Clock::now();
    for (const auto& w : same) {
      if (w->finished) continue;
      auto action = w->fsm.on_wake(now);
      if (action.kind == AcquireFsm::Action::Kind::none) continue;
      w->timer.cancel();
      step(w, action);
    }
  }
  asio::post(rt_->io, [done = std::move(op->done), lease = std::move(lease)]() mutable {
    done(Result<Lease>(std::move(lease)));
  });
}

// Ends an acquire: status ok means granted() already queued the lease.
void ClientCore::finish(const std::shared_ptr<AcquireOp>& op, Status status) {
  op->finished = true;
  op->timer.cancel();
  live_ops_.erase(op);
  if (op->in_waiters) {
    auto it = waiters_.find(op->name);
    if (it != waiters_.end()) {
      it->second.remove(op);
      if (it->second.empty()) {
        waiters_.erase(it);
        release_epoch_.erase(op->name);
      }
    }
    op->in_waiters = false;
  }
  if (op->watching) backend_->unwatch(op->name);
  if (!status.ok()) {
    // An attempt in doubt may hold the lock on the server; a fresh attempt
    // whose reply was lost may still arrive there. Undo exactly that grant.
    if (op->fsm.in_doubt() || op->stray)
      cleanup_in_doubt(op->hold, op->sent_held, op->sent_grant, op->stray ? op->lease : milliseconds(0));
    if (op->woken) on_release_published(op->name);  // pass the wake-up on
  }
  --op->hold->users;
  maybe_forget(op->hold);
  if (!status.ok()) {
    asio::post(rt_->io, [done = std::move(op->done), status = std::move(status)]() mutable {
      done(Result<Lease>(std::move(status)));
    });
  }
}

// An acquire whose outcome stayed unknown may have been granted on the
// server. Undo it with the idempotent release of that grant: it decrements
// only if the server's depth is one more than `held`, and is a no-op
// otherwise; a tombstone refuses a stray copy of a fresh attempt.
void ClientCore::cleanup_in_doubt(const std::shared_ptr<Hold>& hold, unsigned held, std::uint64_t grant,
                                  milliseconds tombstone) {
  auto alive = alive_;
  ++hold->users;
  hold_exec(hold, [this, alive, hold, held, grant, tombstone] {
    if (!*alive) return;
    ReleaseCall call{hold->name, hold->owner, held + 1, false};
    call.grant = grant;
    call.tombstone = tombstone;
    backend_->release(call, [this, alive, hold](Result<ReleaseOutcome> r) {
      if (!*alive) return;
      if (!r.ok())
        log(LogLevel::warning, "cleanup after an in-doubt acquire of '" + hold->name +
                                   "' failed (it expires with its lease): " + r.status().to_string());
      --hold->users;
      hold_op_done(hold);
    });
  });
}

void ClientCore::on_release_published(const std::string& name) {
  auto it = waiters_.find(name);
  if (it == waiters_.end()) return;
  ++release_epoch_[name];
  const auto now = Clock::now();
  // Wake one waiter per release: the others would only find it taken again.
  // step() may finish the op, which erases it from this very list: it gets
  // its own reference, and the loop ends before the list is touched again.
  for (auto pos = it->second.begin(); pos != it->second.end(); ++pos) {
    std::shared_ptr<AcquireOp> op = *pos;
    auto action = op->fsm.on_wake(now);
    if (action.kind == AcquireFsm::Action::Kind::none) continue;
    op->woken = true;
    op->timer.cancel();
    step(op, action);
    return;
  }
}

void ClientCore::wake_all() {
  const auto now = Clock::now();
  std::vector<std::shared_ptr<AcquireOp>> ops;
  for (auto& [name, list] : waiters_) {
    ++release_epoch_[name];
    ops.insert(ops.end(), list.begin(), list.end());
  }
  for (auto& op : ops) {
    if (op->finished) continue;
    auto action = op->fsm.on_wake(now);
    if (action.kind == AcquireFsm::Action::Kind::none) continue;
    op->timer.cancel();
    step(op, action);
  }
}

void ClientCore::mark_lost(const std::shared_ptr<Hold>& hold, LossReason reason) {
  if (hold->lost.exchange(true)) return;
  scheduler_.remove(hold->id);
  scheduled_.erase(hold->id);
  leases_lost_.fetch_add(1, std::memory_order_relaxed);
  log(LogLevel::warning, "lock '" + hold->name + "' lost: " + std::string(to_string(reason)));
  hold->lost_source.request_stop();
  run_on_lost(hold, reason);
}

// The user's callback runs in a handler of its own, holding nothing of
// *this: it may drop the last Client handle, which destroys *this.
void ClientCore::run_on_lost(const std::shared_ptr<Hold>& hold, LossReason reason) {
  if (!hold->on_lost) return;
  asio::post(rt_->io, [cb = hold->on_lost, reason, logger = options_.logger] {
    try {
      cb(reason);
    } catch (const std::exception& e) {
      emit(logger, LogLevel::error, std::string("on_lost callback threw: ") + e.what());
    } catch (...) {
      emit(logger, LogLevel::error, "on_lost callback threw");
    }
  });
}

void ClientCore::rearm_renewal() {
  if (!renew_timer_) return;  // shutting down
  auto next = scheduler_.next_wakeup().value_or(Clock::time_point::max());
  {
    // Staged holds count too: a caller that staged one after our last
    // adoption relies on this timer to be adopted in time.
    std::lock_guard lk(stage_mu_);
    next = std::min(next, staged_due_);
    // Nothing due: an armed timer is left to fire once, idle, instead of
    // cancelled. Fast grants staged meanwhile are then adopted by it, with
    // no wake-up of their own (a loop of short holds wakes nobody).
    if (next == Clock::time_point::max() && armed_ != Clock::time_point::max() && armed_ > Clock::now()) return;
    armed_ = next;
  }
  if (next == Clock::time_point::max()) {
    renew_timer_->cancel();
    return;
  }
  renew_timer_->expires_at(next);
  auto alive = alive_;
  renew_timer_->async_wait([this, alive](const error_code& ec) {
    if (ec || !*alive) return;
    on_renewal_timer();
  });
}

void ClientCore::on_renewal_timer() {
  adopt_staged();
  const auto now = Clock::now();
  for (auto [id, reason] : scheduler_.take_lost(now)) {
    auto it = scheduled_.find(id);
    if (it == scheduled_.end()) continue;
    auto hold = it->second.lock();
    scheduled_.erase(it);
    if (hold) mark_lost(hold, reason);
  }
  auto due = scheduler_.take_due(now);
  for (std::size_t begin = 0; begin < due.size(); begin += kRenewBatch) {
    std::vector<RenewalScheduler::Id> ids;
    std::vector<RenewCall> calls;
    for (std::size_t i = begin; i < std::min(due.size(), begin + kRenewBatch); ++i) {
      auto it = scheduled_.find(due[i]);
      auto hold = it == scheduled_.end() ? nullptr : it->second.lock();
      if (!hold) {
        scheduler_.remove(due[i]);
        continue;
      }
      ids.push_back(due[i]);
      calls.push_back({hold->name, hold->owner, hold->grant, hold->lease});
    }
    if (calls.empty()) continue;
    renewal_round_trips_.fetch_add(1, std::memory_order_relaxed);
    auto alive = alive_;
    backend_->renew(calls, [this, alive, ids = std::move(ids), sent_at = now](Result<std::vector<RenewOutcome>> r) {
      if (!*alive) return;
      const auto now2 = Clock::now();
      for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto id = ids[i];
        if (!scheduler_.contains(id)) continue;  // released or lost meanwhile
        auto hold = scheduled_[id].lock();
        if (!hold || hold->releasing.load()) continue;
        if (!r.ok()) {
          // Counted from the send: the renewal could not have confirmed
          // anything later than that.
          scheduler_.failed(id, sent_at);
          continue;
        }
        switch ((*r)[i]) {
          case RenewOutcome::renewed:
            scheduler_.renewed(id, sent_at);
            hold->valid_until_ns.store(ticks(scheduler_.valid_until(id)));
            break;
          case RenewOutcome::expired: mark_lost(hold, LossReason::expired); break;
          case RenewOutcome::taken: mark_lost(hold, LossReason::taken); break;
          case RenewOutcome::wrong_type: mark_lost(hold, LossReason::wrong_type); break;
          case RenewOutcome::unconfirmed: scheduler_.failed(id, sent_at); break;
        }
      }
      if (!r.ok())
        log(LogLevel::warning, "lease renewal failed (retrying until the leases can no longer be confirmed): " +
                                   r.status().to_string());
      rearm_renewal();
    });
  }
  rearm_renewal();
}

void ClientCore::release(std::shared_ptr<Hold> hold, std::function<void(Status)> done) {
  post([self = shared_from_this(), hold = std::move(hold), done = std::move(done)]() mutable {
    self->release_io(std::move(hold), std::move(done));
  });
}

struct ClientCore::ReleaseOp {
  std::shared_ptr<Hold> hold;
  std::function<void(Status)> done;
  int tries = 0;
};

void ClientCore::release_io(std::shared_ptr<Hold> hold, std::function<void(Status)> done) {
  if (closing_) return done(Status(Errc::cancelled, "client closed; its locks were released"));
  adopt_staged();
  ++hold->users;
  auto op = std::make_shared<ReleaseOp>(ReleaseOp{std::move(hold), std::move(done)});
  auto alive = alive_;
  hold_exec(op->hold, [this, alive, op] {
    if (*alive) send_release(op);
  });
}

void ClientCore::send_release(const std::shared_ptr<ReleaseOp>& op) {
  const unsigned held = op->hold->depth.load();
  if (held == 0) return end_release(op, 0, Status(Errc::not_held, "the lease no longer holds the lock"));
  auto alive = alive_;
  ReleaseCall call{op->hold->name, op->hold->owner, held, false};
  call.grant = op->hold->grant;
  if (held == 1 && op->hold->stray) call.tombstone = op->hold->lease;
  backend_->release(call, [this, alive, op, held](Result<ReleaseOutcome> r) {
    if (!*alive) return;
    // The script is idempotent: after a lost reply, sending it again is safe.
    if (!r.ok() && r.code() == Errc::outcome_unknown && op->tries < 2) {
      ++op->tries;
      return send_release(op);
    }
    auto [depth, status] = release_result(r, held, op->tries, op->hold->name);
    end_release(op, depth, std::move(status));
  });
}

// Whatever the server said, the level is gone here: a lease we tried to give
// up is never renewed again. If it survived on the server, it expires there.
void ClientCore::end_release(const std::shared_ptr<ReleaseOp>& op, unsigned depth, Status status) {
  Hold& hold = *op->hold;
  const bool was_held = hold.depth.load() > 0;
  hold.depth.store(depth);
  if (depth == 0 && was_held) {
    if (scheduler_.contains(hold.id)) {
      scheduler_.remove(hold.id);
      scheduled_.erase(hold.id);
      rearm_renewal();
    }
    leases_held_.fetch_sub(1, std::memory_order_relaxed);
  }
  --hold.users;
  auto done = std::move(op->done);
  hold_op_done(op->hold);
  // In a handler of its own: it may drop the last Client handle.
  asio::post(rt_->io, [done = std::move(done), status = std::move(status)]() mutable { done(std::move(status)); });
}

void ClientCore::inspect(std::string name, std::function<void(Result<LockInfo>)> done) {
  if (Status bad = validate_name(name); !bad.ok()) {
    post([done = std::move(done), bad]() mutable { done(bad); });
    return;
  }
  post([self = shared_from_this(), name = std::move(name), done = std::move(done)]() mutable {
    if (self->closing_) return done(Status(Errc::cancelled, "client closed"));
    self->backend_->inspect(name, [done = std::move(done)](Result<LockInfo> r) mutable { done(std::move(r)); });
  });
}

void ClientCore::deliver(std::function<void(Status)> done, Status status) {
  post([done = std::move(done), status = std::move(status)]() mutable { done(std::move(status)); });
}

ClientStats ClientCore::stats() const {
  // Backend counters live on the I/O thread: copy them from there.
  auto refresh = [this] {
    if (!backend_) return;
    commands_sent_.store(backend_->commands_sent());
    reconnects_.store(backend_->reconnects());
  };
  if (on_io_thread()) {
    refresh();
  } else if (rt_) {
    std::promise<void> done;
    asio::post(rt_->io, [&] {
      refresh();
      done.set_value();
    });
    done.get_future().wait();
  }
  ClientStats s;
  s.grants = grants_.load();
  s.late_grants = late_grants_.load();
  s.renewal_round_trips = renewal_round_trips_.load();
  s.leases_lost = leases_lost_.load();
  s.release_failures = release_failures_.load();
  s.leases_held = leases_held_.load();
  s.commands_sent = commands_sent_.load();
  s.reconnects = reconnects_.load();
  return s;
}

}  // namespace dlock::detail

namespace dlock::detail {

// ---- the blocking fast path (caller's thread) ------------------------------

std::optional<Result<Lease>> ClientCore::acquire_now(const std::string& name, milliseconds wait,
                                                     const LockOptions& o, AcquireSeed& seed) {
  if (!backend_ || on_io_thread()) return std::nullopt;
  Status bad = validate_name(name);
  if (bad.ok()) bad = check_lock_options(o, wait);
  if (bad.ok()) bad = validate_owner(o.owner);
  if (!bad.ok()) return Result<Lease>(bad);
  const bool renew = !o.lease.has_value();
  const milliseconds lease = o.lease.value_or(o.watchdog_lease);
  AcquireCall call{name, o.owner, lease, 0};
  call.grant = next_grant_.fetch_add(1);
  const auto sent_at = Clock::now();
  auto r = backend_->acquire_now(call);
  if (!r) return std::nullopt;
  seed.grant = call.grant;
  if (!r->ok()) {
    // The asynchronous path retries within error_retry and, if it stays in
    // doubt, undoes this grant.
    if (r->code() == Errc::outcome_unknown) seed.stray = true;
    seed.error = r->status();
    if (transient(r->code())) return std::nullopt;
    return Result<Lease>(r->status());
  }
  switch ((*r)->kind) {
    case AcquireOutcome::Kind::busy:
      if (wait.count() == 0) return Result<Lease>(Status(Errc::busy, "the lock is held by another owner"));
      return std::nullopt;  // waiting is the I/O thread's job
    case AcquireOutcome::Kind::lost:
    case AcquireOutcome::Kind::mismatch:
      return std::nullopt;
    case AcquireOutcome::Kind::granted: break;
  }
  if (Clock::now() >= sent_at + lease - RenewalScheduler::drift(lease)) {
    // Late: undone, and the asynchronous path tries again (same grant).
    late_grants_.fetch_add(1, std::memory_order_relaxed);
    ReleaseCall undo{name, o.owner, 1, false};
    undo.grant = call.grant;
    auto u = backend_->release_now(undo);
    if (!u || !u->ok()) seed.stray = true;
    return std::nullopt;
  }
  auto hold = std::make_shared<Hold>(name, o.owner);
  hold->fence.store((*r)->fence);
  hold->depth.store(1);
  hold->grant = call.grant;
  hold->lease = lease;
  hold->on_lost = o.on_lost;
  hold->valid_until_ns.store(ticks(sent_at + lease - RenewalScheduler::drift(lease)));
  hold->fast.store(true);
  grants_.fetch_add(1, std::memory_order_relaxed);
  leases_held_.fetch_add(1, std::memory_order_relaxed);
  stage(hold, sent_at, renew ? o.renew_interval : lease, renew);
  return Result<Lease>(Lease(weak_from_this(), std::move(hold)));
}

// Hands a fast grant to the I/O thread, waking it only if the grant needs
// attention (its first renewal, or its expiry) before the armed timer.
void ClientCore::stage(std::shared_ptr<Hold> hold, Clock::time_point sent_at, milliseconds interval, bool renew) {
  const auto due = renew ? sent_at + interval : sent_at + hold->lease - RenewalScheduler::drift(hold->lease);
  bool wake = false;
  {
    std::lock_guard lk(stage_mu_);
    staged_.push_back({std::move(hold), sent_at, interval, renew});
    staged_due_ = std::min(staged_due_, due);
    wake = due < armed_;
    if (wake) armed_ = due;  // one wake-up is enough for everything staged before it
  }
  // A weak reference: a posted handler must not keep *this alive past the
  // last Client handle (its shutdown adopts what is staged).
  if (wake) post([weak = weak_from_this()] {
    if (auto self = weak.lock()) {
      self->adopt_staged();
      self->rearm_renewal();
    }
  });
}

std::optional<Status> ClientCore::release_now(const std::shared_ptr<Hold>& hold) {
  if (!backend_ || on_io_thread() || !hold->fast.load() || hold->depth.load() != 1 || hold->lost.load())
    return std::nullopt;
  bool was_staged = false;
  {
    std::lock_guard lk(stage_mu_);
    auto it = std::find_if(staged_.begin(), staged_.end(), [&](const Staged& s) { return s.hold == hold; });
    if (it != staged_.end()) {
      staged_.erase(it);
      was_staged = true;
    }
  }
  hold->releasing.store(true);
  ReleaseCall call{hold->name, hold->owner, 1, false};
  call.grant = hold->grant;
  std::optional<Result<ReleaseOutcome>> r;
  int tries = 0;
  for (;; ++tries) {
    r = backend_->release_now(call);
    if (!r || r->ok() || r->code() != Errc::outcome_unknown || tries == 2) break;
  }
  Status status;
  if (!r) {
    status = Status(Errc::unavailable, "no blocking connection for the release");
  } else {
    status = release_result(*r, 1, tries, hold->name).second;
  }
  hold->depth.store(0);
  leases_held_.fetch_sub(1, std::memory_order_relaxed);
  if (!was_staged) post([weak = weak_from_this(), hold] {
    if (auto self = weak.lock()) self->retire(hold);
  });
  return status;
}

// I/O thread: fast grants join the registry and the scheduler.
void ClientCore::adopt_staged() {
  std::vector<Staged> staged;
  {
    std::lock_guard lk(stage_mu_);
    staged.swap(staged_);
    staged_due_ = Clock::time_point::max();
  }
  bool added = false;
  for (Staged& s : staged) {
    Hold& h = *s.hold;
    if (h.depth.load() == 0) continue;
    holds_[{h.name, h.owner}] = s.hold;  // replaces a finished hold of the same owner
    h.id = next_id_++;
    scheduled_[h.id] = s.hold;
    scheduler_.add(h.id, s.sent_at, h.lease, s.interval, s.renew);
    added = true;
  }
  if (added) rearm_renewal();
}

// I/O thread: a fast release of an adopted hold finished.
void ClientCore::retire(const std::shared_ptr<Hold>& hold) {
  if (scheduler_.contains(hold->id)) {
    scheduler_.remove(hold->id);
    scheduled_.erase(hold->id);
    rearm_renewal();
  }
  maybe_forget(hold);
}

}  // namespace dlock::detail

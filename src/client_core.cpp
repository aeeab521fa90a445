// ClientCore: options, backend choice, the I/O thread, shutdown, inspect
// and statistics. The lock paths live in client_core_*.cpp.
#include <cstdio>
#include <future>
#include <iostream>

#include "backend_registry.hpp"
#include "client_core_internal.hpp"
#include "core/names.hpp"
#include "core/token.hpp"
#include "holder_description.hpp"

namespace dlock::detail {

namespace {

// Runs the I/O loop; it sleeps in epoll whenever there is nothing to do. It
// never spins: on a busy machine spinning steals the time slices that the
// server and the application need, and blocking calls do not hop through
// this thread anyway (acquire_now / release_now).
void run_io(boost::asio::io_context& io) {
  while (!io.stopped()) io.run();
}

Status check_options(const ClientOptions& o) {
  if (o.connect_timeout.count() <= 0) return {Errc::invalid_argument, "connect_timeout must be > 0"};
  if (o.command_timeout.count() <= 0) return {Errc::invalid_argument, "command_timeout must be > 0"};
  if (o.reconnect_backoff_min.count() <= 0 || o.reconnect_backoff_max < o.reconnect_backoff_min)
    return {Errc::invalid_argument, "reconnect backoff must satisfy 0 < min <= max"};
  if (o.wait_replicas < 0) return {Errc::invalid_argument, "wait_replicas must be >= 0"};
  if (o.wait_replicas > 0 && o.wait_timeout.count() <= 0)
    return {Errc::invalid_argument, "wait_timeout must be > 0 ms"};
  if (o.on_stats && o.stats_interval.count() <= 0)
    return {Errc::invalid_argument, "stats_interval must be > 0 ms when on_stats is set"};
  return {};
}

Status check_lease(const char* field, milliseconds lease, milliseconds min) {
  if (lease < min || lease > kMaxLease)
    return {Errc::invalid_argument, std::string(field) + " must be between " + std::to_string(min.count()) +
                                        " ms and " + std::to_string(kMaxLease.count()) + " ms (got " +
                                        std::to_string(lease.count()) + " ms)"};
  return {};
}

// `done` for a read (inspect, names), answered by the backend or, if the
// server stays silent, by `limit`: whichever comes first, once. A backend
// whose calls wait on a session (ZooKeeper) would otherwise keep an
// operator's read for the whole session timeout. On the I/O thread only.
template <class T>
std::function<void(Result<T>)> within(asio::io_context& io, milliseconds limit, std::string what,
                                      std::function<void(Result<T>)> done) {
  struct Once {
    Once(asio::io_context& io, milliseconds limit, std::function<void(Result<T>)> d)
        : done(std::move(d)), timer(io, limit) {}
    std::function<void(Result<T>)> done;
    asio::steady_timer timer;
  };
  auto once = std::make_shared<Once>(io, limit, std::move(done));
  once->timer.async_wait([once, limit, what = std::move(what)](const error_code& ec) {
    if (ec || !once->done) return;
    std::exchange(once->done,
                  nullptr)(Status(Errc::timeout, what + ": no answer within " + std::to_string(limit.count()) + " ms"));
  });
  return [once](Result<T> r) {
    if (!once->done) return;
    once->timer.cancel();
    std::exchange(once->done, nullptr)(std::move(r));
  };
}

}  // namespace

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

Status check_acquire(const std::string& name, milliseconds wait, const LockOptions& o, const Capabilities& caps) {
  Status bad = validate_name(name);
  if (bad.ok() && o.holder.size() > kMaxHolderInfo)
    bad = {Errc::invalid_argument, "holder: at most " + std::to_string(kMaxHolderInfo) + " bytes"};
  // Some stores end a text at a NUL: refused everywhere, as in names.
  if (bad.ok() && o.holder.find('\0') != std::string::npos)
    bad = {Errc::invalid_argument, "holder contains a NUL byte"};
  if (bad.ok() && o.holder_label.find('\0') != std::string::npos)
    bad = {Errc::invalid_argument, "holder_label contains a NUL byte"};
  if (bad.ok()) bad = check_lock_options(o, wait);
  if (bad.ok() && !o.owner.empty()) bad = validate_owner(o.owner);
  if (bad.ok() && o.lease && !caps.needs_renewal)
    bad = {Errc::invalid_argument,
           "lease: this backend's locks live as long as the client's session (its "
           "timeout bounds how long a crashed holder blocks others); a fixed lease is "
           "not supported"};
  return bad;
}

Status check_lock_options(const LockOptions& o, milliseconds wait) {
  if (wait.count() < 0) return {Errc::invalid_argument, "wait must be >= 0 ms"};
  if (o.lease) {
    if (Status s = check_lease("lease", *o.lease, kMinLease); !s.ok()) return s;
  } else {
    // A shorter lease runs out between renewals (options.hpp).
    if (Status s = check_lease("watchdog_lease", o.watchdog_lease, kMinWatchdogLease); !s.ok()) return s;
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
    case ReleaseOutcome::Kind::released:
      return {r->depth, Status()};
    case ReleaseOutcome::Kind::not_held:
      return {held - 1, tries > 0
                            ? Status()
                            : Status(Errc::not_held, "lock '" + name + "' was not held: the lease expired first")};
    case ReleaseOutcome::Kind::not_owner:
      return {held - 1, tries > 0 ? Status()
                                  : Status(Errc::not_owner, "lock '" + name +
                                                                "' is held by another owner (this lease had "
                                                                "expired); nothing was touched")};
    case ReleaseOutcome::Kind::mismatch:
      break;
  }
  return {held - 1, Status(Errc::server_error, "re-entry depth on the server differs from this client's")};
}

ClientCore::ClientCore(ClientOptions options)
    : options_(std::move(options)),
      default_holder_(describe_holder("")),
      rt_(std::make_shared<Runtime>()),
      next_grant_(random_u64() | 1) {}

void ClientCore::log(LogLevel level, const std::string& message) const { emit(options_.logger, level, message); }

Result<std::shared_ptr<ClientCore>> ClientCore::connect(std::string_view url, ClientOptions options) {
  if (Status s = check_options(options); !s.ok()) return s;
  // No thread yet: if the URL is refused, the deleter just deletes.
  std::shared_ptr<ClientCore> core(new ClientCore(std::move(options)), &ClientCore::destroy);
  ClientCore* raw = core.get();
  BackendContext context{core->rt_->io, core->options_,
                         [raw](LogLevel level, std::string_view msg) { raw->log(level, std::string(msg)); }};
  auto backend = make_backend(url, context);
  if (!backend.ok()) return backend.status();
  core->backend_ = std::move(*backend);
  core->backend_name_ = std::string(backend_family(url));
  return start(std::move(core));
}

Result<std::shared_ptr<ClientCore>> ClientCore::connect_with(const BackendMaker& make, ClientOptions options,
                                                             ClockFn clock) {
  if (Status s = check_options(options); !s.ok()) return s;
  std::shared_ptr<ClientCore> core(new ClientCore(std::move(options)), &ClientCore::destroy);
  core->clock_ = std::move(clock);
  core->backend_ = make(core->rt_->io);
  return start(std::move(core));
}

// Starts the I/O thread and the backend; waits for the first connection.
Result<std::shared_ptr<ClientCore>> ClientCore::start(std::shared_ptr<ClientCore> core) {
  ClientCore* raw = core.get();
  core->caps_ = core->backend_->capabilities();
  core->set_backend_events();
  core->renew_timer_ = std::make_unique<asio::steady_timer>(core->rt_->io);
  if (core->options_.on_stats) core->stats_timer_ = std::make_unique<asio::steady_timer>(core->rt_->io);
  auto rt = core->rt_;
  // A callback that throws must not take the process down with the I/O
  // thread: report it and keep serving.
  rt->thread = std::thread([rt, logger = core->options_.logger] {
    for (;;) {
      try {
        run_io(rt->io);
        break;
      } catch (const std::exception& e) {  // *this may be gone: no log()
        emit(logger, LogLevel::error, std::string("a callback threw on the I/O thread: ") + e.what());
      } catch (...) {
        emit(logger, LogLevel::error, "a callback threw on the I/O thread");
      }
    }
    delete rt->orphan;  // drained: no handler can reach it any more
  });
  core->io_thread_id_ = rt->thread.get_id();

  std::promise<Status> started;
  auto fut = started.get_future();
  core->post([raw, &started] { raw->backend_->start([&started](Status s) { started.set_value(std::move(s)); }); });
  Status s = fut.get();
  if (!s.ok()) return s;  // the deleter closes, drains and deletes
  core->backend_->open_blocking();
  if (core->stats_timer_) core->post([raw] { raw->arm_stats(Clock::now() + raw->options_.stats_interval); });
  return core;
}

// ClientOptions::on_stats, every stats_interval (a late tick is not made up
// for: the next one is an interval after it).
void ClientCore::arm_stats(Clock::time_point at) {
  if (closing_) return;
  stats_timer_->expires_at(at);
  stats_timer_->async_wait([this, at](const error_code& ec) {
    if (ec || closing_) return;
    try {
      options_.on_stats(stats());
    } catch (const std::exception& e) {
      log(LogLevel::error, std::string("on_stats callback threw: ") + e.what());
    } catch (...) {
      log(LogLevel::error, "on_stats callback threw");
    }
    // closing_ now: the callback dropped the last handle, and nothing is armed.
    const auto next = at + options_.stats_interval;
    arm_stats(next > Clock::now() ? next : Clock::now() + options_.stats_interval);
  });
}

// The lifetime rule (backend.hpp): handlers capture `this` raw, so *this is
// deleted only after its I/O loop has drained. From another thread: shut
// down on the I/O thread, join it, delete. On the I/O thread itself (the last
// handle dropped inside a callback): shut down now and leave the deletion to
// the thread, after its loop returns.
// What the backend pushes, each checked against closing_: handlers still
// queued at shutdown do nothing.
void ClientCore::set_backend_events() {
  BackendEvents events;
  events.released = [this](const WatchKey& key) {
    if (closing_) return;
    on_release_published(key.name, key.attempt);
    observers_of(key.name);
  };
  events.changed = [this](const std::string& name) {
    if (!closing_) observers_of(name);
  };
  events.handed = [this](const HandOver& to) {
    if (closing_) return;
    on_handed(to);
    observers_of(to.name);
  };
  events.resync = [this] {
    if (closing_) return;
    wake_all();
    for (auto& [id, obs] : observers_) look(obs);
  };
  events.link = [this](bool up) {
    if (closing_ || up) return;
    scheduler_.link_down(now());
    rearm_renewal();
  };
  events.lost = [this](const std::vector<HoldRef>& holds, LossReason reason) {
    if (!closing_) on_holds_lost(holds, reason);
  };
  events.alive_until = [this](Clock::time_point until) {
    if (!closing_) on_alive_until(until);
  };
  backend_->set_events(std::move(events));
}

void ClientCore::destroy(ClientCore* core) noexcept {
  auto rt = core->rt_;
  if (!rt->thread.joinable()) {  // the thread never started
    delete core;
    return;
  }
  if (std::this_thread::get_id() == rt->thread.get_id()) {
    core->shutdown_io();
    rt->orphan = core;
    rt->thread.detach();
    return;
  }
  asio::post(rt->io, [core] { core->shutdown_io(); });
  rt->thread.join();
  delete core;
}

// Frees every lock still held (one round trip, bounded by the command
// timeout), fails waiting acquires with cancelled, then closes the backend
// and lets the I/O loop run dry.
void ClientCore::shutdown_io() {
  adopt_staged();
  closing_ = true;
  renew_timer_->cancel();
  if (stats_timer_) stats_timer_->cancel();
  waiters_.clear();
  observers_.clear();  // their timers' handlers see closing_
  std::vector<ReleaseCall> calls;
  std::vector<AbandonCall> abandons;
  for (auto& [key, hold] : holds_) {
    if (hold->depth.load() > 0 && !hold->lost.load()) {
      // Where the backend counts no levels, it holds one.
      ReleaseCall c{hold->name, hold->owner, caps_.server_reentry ? hold->depth.load() : 1u, true};
      c.mode = hold->mode;
      c.grant = hold->grant;
      if (hold->stray) c.tombstone = hold->lease;
      calls.push_back(std::move(c));
    }
    hold->lost.store(true);
    hold->lost_source.request_stop();
    hold->depth.store(0);
  }
  // Calls still queued behind one in flight run now and see closing_: a
  // release reports cancelled, a cleanup joins the ones sent below. Each
  // captured its hold, so a queue left standing would keep it alive.
  for (auto& [key, hold] : holds_) {
    auto queued = std::move(hold->ops);
    hold->ops.clear();
    for (auto& op : queued) op();
  }
  holds_.clear();
  // Every acquire still running completes with cancelled and is abandoned;
  // one whose request is out is undone behind it on the same connection (it
  // may be granted).
  // Cleanups waiting to be sent again go out with the others, once.
  for (auto& [timer, call] : abandon_timers_) {
    timer->cancel();
    abandons.push_back(call);
  }
  abandon_timers_.clear();
  for (auto& call : abandons_queued_at_close_) abandons.push_back(std::move(call));
  abandons_queued_at_close_.clear();
  auto ops = std::move(live_ops_);
  live_ops_.clear();
  for (const auto& op : ops) {
    op->finished = true;
    op->timer.cancel();
    op->answer_timer.cancel();  // an armed timer would hold the loop's drain until it fired
    if (op->sent_any) {
      AbandonCall c = abandon_call(*op, op->in_flight || op->fsm.in_doubt());
      if (c.in_doubt && op->sent_held == 0) c.tombstone = op->lease;
      abandons.push_back(std::move(c));
    }
    post([done = std::move(op->done)]() mutable {
      if (done) done(Status(Errc::cancelled, "client closed during the acquire"));
    });
  }
  if (!backend_) {
    rt_->work.reset();
    return;
  }
  // The cleanups already out are waited for too (closing_call_done).
  closing_releases_ = calls.size() + abandons.size() + abandons_out_;
  for (const ReleaseCall& c : calls) backend_->release(c, [this](Result<ReleaseOutcome>) { closing_call_done(); });
  for (const AbandonCall& c : abandons) backend_->abandon(c, [this](Status) { closing_call_done(); });
  if (closing_releases_ == 0) return finish_close();
  close_timer_ = std::make_unique<asio::steady_timer>(rt_->io, options_.command_timeout);
  close_timer_->async_wait([this](const error_code& ec) {
    if (!ec) finish_close();
  });
}

void ClientCore::closing_call_done() {
  if (closing_releases_ > 0 && --closing_releases_ == 0) finish_close();
}

void ClientCore::finish_close() {
  if (std::exchange(closed_, true)) return;
  if (close_timer_) close_timer_->cancel();
  // Posted: this may run inside a backend callback.
  post([this] {
    backend_->close();
    rt_->work.reset();
  });
}

void ClientCore::inspect(std::string name, std::function<void(Result<LockInfo>)> done) {
  if (Status bad = validate_name(name); !bad.ok()) {
    post([done = std::move(done), bad]() mutable { done(bad); });
    return;
  }
  post([self = shared_from_this(), name = std::move(name), done = std::move(done)]() mutable {
    if (self->closing_) return done(Status(Errc::cancelled, "client closed"));
    self->backend_->inspect(name, within<LockInfo>(self->rt_->io, self->options_.command_timeout,
                                                   "inspect '" + name + "'", std::move(done)));
  });
}

void ClientCore::names(std::string prefix, std::function<void(Result<std::vector<std::string>>)> done) {
  post([self = shared_from_this(), prefix = std::move(prefix), done = std::move(done)]() mutable {
    if (self->closing_) return done(Status(Errc::cancelled, "client closed"));
    self->backend_->names(prefix, within<std::vector<std::string>>(self->rt_->io, self->options_.command_timeout,
                                                                   "list the locks", std::move(done)));
  });
}

std::string ClientCore::holder_info(const LockOptions& o) const {
  if (!o.holder.empty()) return o.holder;
  if (!options_.describe_holder) return {};
  return o.holder_label.empty() ? default_holder_ : describe_holder(o.holder_label);
}

void ClientCore::deliver(std::function<void(Status)> done, Status status) {
  post([done = std::move(done), status = std::move(status)]() mutable { done(std::move(status)); });
}

ClientStats ClientCore::stats() const {
  ClientStats s;
  // Backend counters and the waits live on the I/O thread: read them there,
  // and the losses with them (so the snapshot's parts add up).
  auto refresh = [this, &s] {
    if (backend_) {
      commands_sent_.store(backend_->commands_sent());
      reconnects_.store(backend_->reconnects());
    }
    s.waits_granted = waits_granted_;
    s.waits_timed_out = waits_timed_out_;
    s.waits_failed = waits_failed_;
    s.wait_buckets = wait_buckets_;
    s.wait_time_us_sum = wait_time_us_sum_;
    s.leases_lost = leases_lost_.load();
    auto lost = [this](LossReason r) { return lost_by_reason_[static_cast<std::size_t>(r)].load(); };
    s.lost_expired = lost(LossReason::expired);
    s.lost_taken = lost(LossReason::taken);
    s.lost_unreachable = lost(LossReason::unreachable);
    s.lost_wrong_type = lost(LossReason::wrong_type);
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
  s.backend = backend_name_;
  s.grants = grants_.load();
  s.late_grants = late_grants_.load();
  s.renewal_round_trips = renewal_round_trips_.load();
  s.release_failures = release_failures_.load();
  s.wakeups = wakeups_.load();
  s.leases_held = leases_held_.load();
  s.commands_sent = commands_sent_.load();
  s.reconnects = reconnects_.load();
  s.busy_answers = busy_answers_.load();
  s.renewals = renewals_.load();
  s.renewal_failures = renewal_failures_.load();
  s.outcome_unknown = outcome_unknown_.load();
  return s;
}

}  // namespace dlock::detail

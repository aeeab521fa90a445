// The asynchronous acquire: the per-hold queue of script calls, the
// acquire state machine's driver, the waiter list and its wake-ups.
#include "client_core_internal.hpp"
#include "core/names.hpp"
#include "core/token.hpp"
#include "core/transient.hpp"

namespace dlock::detail {

std::shared_ptr<Hold> ClientCore::find_or_add_hold(const std::string& name, const std::string& owner, LockMode mode) {
  auto& slot = holds_[{name, owner, mode}];
  if (!slot) slot = std::make_shared<Hold>(name, owner, mode);
  return slot;
}

bool ClientCore::queued(const LockOptions& o, Shape shape) const {
  if (shape.mode == LockMode::shared) return true;
  return o.fair && !caps_.always_fair;  // a queue backend is fair without it
}

void ClientCore::maybe_forget(const std::shared_ptr<Hold>& hold) {
  if (hold->depth.load() != 0 || hold->users != 0 || hold->op_busy || !hold->ops.empty()) return;
  auto it = holds_.find({hold->name, hold->owner, hold->mode});
  if (it != holds_.end() && it->second == hold) holds_.erase(it);
}

// Script calls of one owner on one lock go out one at a time: each carries
// the depth the owner holds, which must not change under it.
void ClientCore::hold_exec(const std::shared_ptr<Hold>& hold, std::function<void()> op) {
  std::uint8_t was = Hold::kFast;
  hold->order.compare_exchange_strong(was, Hold::kIo);  // from now on its calls are ordered here
  // A fast release out on a caller's thread counts as the running call: it
  // is told to come back here (kFastAwaited), and its end
  // (fast_release_done) runs the queue. If it ended meanwhile, the hold is
  // the I/O thread's already.
  if (was == Hold::kFastReleasing && hold->order.compare_exchange_strong(was, Hold::kFastAwaited)) hold->op_busy = true;
  hold->ops.push_back(std::move(op));
  if (!hold->op_busy) run_next_op(hold);
}

void ClientCore::hold_op_done(const std::shared_ptr<Hold>& hold) {
  hold->op_busy = false;
  if (hold->ops.empty())
    maybe_forget(hold);
  else
    run_next_op(hold);
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
  if (Status bad = check_acquire(name, wait, options, caps_); !bad.ok()) {
    post([done = std::move(done), bad]() mutable { done(bad); });
    return;
  }
  if (options.owner.empty()) options.owner = random_token();
  post([self = shared_from_this(), name = std::move(name), wait, options = std::move(options), done = std::move(done),
        seed]() mutable {
    if (self->closing_) return done(Status(Errc::cancelled, "client closed"));
    self->adopt_staged();
    const auto started = seed.started != Clock::time_point{} ? seed.started : self->now();
    auto op = std::make_shared<AcquireOp>(self->rt_->io, started, wait, options.error_retry,
                                          try_budget(self->options_, options));
    op->name = std::move(name);
    op->renew = !options.lease.has_value();
    op->lease = options.lease.value_or(options.watchdog_lease);
    op->interval = op->renew ? options.renew_interval : op->lease;
    op->opts = std::move(options);
    op->done = std::move(done);
    op->shape = seed.shape;
    op->queued = self->queued(op->opts, seed.shape);
    op->hold = self->find_or_add_hold(op->name, op->opts.owner, seed.shape.mode);
    op->fresh_grant = seed.grant != 0 ? seed.grant : self->next_grant_.fetch_add(1);
    op->attempt = seed.attempt != 0 ? seed.attempt : self->next_attempt_.fetch_add(1);
    op->stray = seed.stray;
    op->sent_any = seed.stray || seed.attempt != 0;                    // the fast attempt may have left something
    if (seed.attempt != 0 && !seed.stray) op->busy_sent_at = started;  // the fast attempt was answered busy
    op->started = started;
    op->may_wait = wait.count() > 0;
    ++op->hold->users;
    self->live_ops_.insert(op);
    // A server that does not answer (paused, cut off) must not hold the
    // call past its deadline: the attempt is then in doubt and undone.
    if (const auto by = op->fsm.answer_by(); by != AcquireFsm::time_point::max()) {
      op->answer_timer.expires_at(by);
      op->answer_timer.async_wait([self = self.get(), op](const error_code& ec) {
        if (ec || self->closing_ || op->finished) return;
        self->step(op, op->fsm.on_no_answer(self->now()));
      });
    }
    // A fast attempt that failed counts as this acquire's first failure (so
    // error_retry bounds the whole call, as documented).
    if (!seed.error.ok()) {
      op->sent_grant = op->fresh_grant;
      return self->step(op, op->fsm.on_error(self->now(), seed.error));
    }
    self->step(op, op->fsm.start());
  });
}

void ClientCore::step(const std::shared_ptr<AcquireOp>& op, AcquireFsm::Action action) {
  using Kind = AcquireFsm::Action::Kind;
  if (action.undo) {
    // The grant came back too late (see AcquireFsm): undo exactly it. No
    // tombstone: this op may still be granted under the same id.
    late_grants_.fetch_add(1, std::memory_order_relaxed);
    AbandonCall undo = abandon_call(*op, true);
    undo.tombstone = milliseconds(0);
    // The next attempts ask under a new grant id: the undo, which may be
    // sent again (abandon), then names a grant nobody will hold.
    if (undo.held == 0) op->fresh_grant = next_grant_.fetch_add(1);
    abandon(op->hold, std::move(undo), op->lease);
  }
  switch (action.kind) {
    case Kind::attempt:
      return send_attempt(op);
    case Kind::watch:
      return start_watch(op, action.until);
    case Kind::wait:
      return wake_at(op, action.until);
    case Kind::done:
      return finish(op, action.status);
    case Kind::none:
      return;
  }
}

void ClientCore::wake_at(const std::shared_ptr<AcquireOp>& op, AcquireFsm::time_point until) {
  until = std::min(until, std::exchange(op->wake_by, Clock::time_point::max()));
  op->timer.expires_at(until);
  op->timer.async_wait([this, op](const error_code& ec) {
    if (ec || closing_ || op->finished) return;
    step(op, op->fsm.on_wake(now()));
  });
}

// Joins the name's waiters and asks the backend to watch for releases; the
// wait's deadline runs meanwhile (a watch may never confirm).
void ClientCore::start_watch(const std::shared_ptr<AcquireOp>& op, AcquireFsm::time_point until) {
  if (!op->in_waiters) {
    waiters_[op->name].push_back(op);
    op->in_waiters = true;
  }
  op->watching = true;
  until = std::min(until, op->wake_by);
  if (until != AcquireFsm::time_point::max()) wake_at(op, until);
  backend_->watch({op->name, op->attempt, op->queued}, [this, op](Status s) {
    if (closing_ || op->finished) return;
    op->timer.cancel();
    if (!s.ok() && s.code() != Errc::cancelled && !std::exchange(warned_blind_, true))
      log(LogLevel::warning, "waiting for locks without release notifications (polling; said once): " + s.to_string());
    step(op, op->fsm.on_watch_ready(now(), s.ok()));
  });
}

void ClientCore::send_attempt(const std::shared_ptr<AcquireOp>& op) {
  hold_exec(op->hold, [this, op] {
    if (closing_) return;
    if (op->finished) return hold_op_done(op->hold);
    Hold& h = *op->hold;
    const unsigned held = h.depth.load();
    if (held > 0 && h.lost.load()) {
      // A re-entry on a hold already reported lost: never granted.
      hold_op_done(op->hold);
      return step(op, op->fsm.on_lost());
    }
    const auto sent_at = now();
    if (held > 0 && !caps_.server_reentry) {
      // The backend keeps no depth: a re-entry is counted here. A queue
      // place this acquire's fast attempt kept (a thread sharing the Mutex
      // found it held) is not needed: left, it would become the head of the
      // queue once the hold is released, held by nobody until the session ends.
      if (op->sent_any) {
        abandon(op->hold, abandon_call(*op, false), op->lease);
        op->sent_any = false;
      }
      AcquireOutcome local;
      local.kind = AcquireOutcome::Kind::granted;
      local.fence = h.fence.load();
      local.depth = held + 1;
      on_attempt_answer(op, local, sent_at);
      return hold_op_done(op->hold);  // after the answer: the next call reads the new depth
    }
    AcquireCall call{op->name, h.owner, op->lease, held};
    call.grant = held > 0 ? h.grant : op->fresh_grant;
    call.attempt = op->attempt;
    call.mode = h.mode;
    call.permits = op->shape.permits;
    call.queued = op->queued;
    call.info = holder_info(op->opts);
    call.waits = op->may_wait;
    call.waited = op->busy_sent_at != Clock::time_point{};
    op->sent_held = call.held;
    op->sent_grant = call.grant;
    op->in_flight = true;
    op->sent_any = true;
    backend_->acquire(call, [this, op, sent_at](Result<AcquireOutcome> r) {
      if (closing_) return;
      op->in_flight = false;
      // The answer first: the next queued call runs inside hold_op_done and
      // must see the depth this grant set (it read the old one, sent a
      // stale `held`, and a second re-entry counted as a replay).
      on_attempt_answer(op, std::move(r), sent_at);
      hold_op_done(op->hold);
    });
  });
}

void ClientCore::on_attempt_answer(const std::shared_ptr<AcquireOp>& op, Result<AcquireOutcome> r,
                                   Clock::time_point sent_at) {
  if (op->finished) return;
  const auto now = this->now();
  if (!r.ok() && r.code() == Errc::outcome_unknown) outcome_unknown_.fetch_add(1, std::memory_order_relaxed);
  if (!r.ok() && r.code() == Errc::outcome_unknown && op->sent_held == 0) op->stray = true;
  if (!r.ok()) return step(op, op->fsm.on_error(now, r.status()));
  switch (r->kind) {
    case AcquireOutcome::Kind::granted: {
      auto action = op->fsm.on_granted(now, sent_at, op->lease, op->hold->depth.load() == 0);
      if (action.kind == AcquireFsm::Action::Kind::done && action.status.ok()) return granted(op, *r, sent_at);
      return step(op, std::move(action));
    }
    case AcquireOutcome::Kind::busy:
      busy_answers_.fetch_add(1, std::memory_order_relaxed);
      op->busy_sent_at = sent_at;
      return step(op, op->fsm.on_busy(now, r->hint));
    case AcquireOutcome::Kind::lost:
      mark_lost(op->hold, LossReason::expired);
      return step(op, op->fsm.on_lost());
    case AcquireOutcome::Kind::mismatch:
      return step(op, op->fsm.on_error(now, Status(Errc::server_error,
                                                   "re-entry depth on the server differs from this client's: "
                                                   "the owner id is used by another client")));
  }
}

void ClientCore::granted(const std::shared_ptr<AcquireOp>& op, const AcquireOutcome& outcome,
                         Clock::time_point sent_at) {
  Hold& h = *op->hold;
  const bool fresh = h.depth.load() == 0;
  h.fence.store(outcome.fence);
  h.depth.store(outcome.depth);
  if (fresh) {
    h.releasing.store(false);  // the same hold, granted again after a fast release
    h.grant = op->sent_grant;
    h.stray = op->stray;
    h.lost.store(false);
    h.lost_source = std::stop_source();
    h.on_lost = op->opts.on_lost;
    h.lease = op->lease;
    h.line = op->queued;
    h.id = next_id_++;
    scheduled_[h.id] = op->hold;
    if (caps_.needs_renewal) {
      scheduler_.add(h.id, sent_at, op->lease, op->interval, op->renew);
      h.valid_until_ns.store(ticks(scheduler_.valid_until(h.id)));
      rearm_renewal();
    } else {
      h.valid_until_ns.store(ticks(std::max(session_until_, outcome.valid_until.value_or(Clock::time_point{}))));
    }
    leases_held_.fetch_add(1, std::memory_order_relaxed);
  }
  grants_.fetch_add(1, std::memory_order_relaxed);
  Lease lease(weak_from_this(), op->hold);
  op->woken = false;
  finish(op, Status());
  wake_same_owner(op);
  post([done = std::move(op->done), lease = std::move(lease)]() mutable { done(Result<Lease>(std::move(lease))); });
}

// Waiters of the same owner can now re-enter: they would otherwise sleep
// until a release that this grant's own holder will not publish soon.
void ClientCore::wake_same_owner(const std::shared_ptr<AcquireOp>& op) {
  auto it = waiters_.find(op->name);
  if (it == waiters_.end()) return;
  std::vector<std::shared_ptr<AcquireOp>> same;
  for (const auto& w : it->second)
    if (w->hold == op->hold) same.push_back(w);
  const auto now = this->now();
  for (const auto& w : same) {
    if (w->finished) continue;
    auto action = w->fsm.on_wake(now);
    if (action.kind == AcquireFsm::Action::Kind::none) continue;
    w->timer.cancel();
    step(w, action);
  }
}

// Ends an acquire: status ok means granted() already queued the lease.
void ClientCore::finish(const std::shared_ptr<AcquireOp>& op, Status status) {
  op->finished = true;
  op->timer.cancel();
  op->answer_timer.cancel();
  live_ops_.erase(op);
  if (op->may_wait && op->busy_sent_at != Clock::time_point{}) count_wait(*op, status);
  if (op->in_waiters) {
    auto it = waiters_.find(op->name);
    if (it != waiters_.end()) {
      it->second.remove(op);
      if (it->second.empty()) waiters_.erase(it);
    }
    op->in_waiters = false;
  }
  if (op->watching) backend_->unwatch({op->name, op->attempt, op->queued});
  if (!status.ok()) {
    // The backend removes what the attempts left: a grant in doubt (a reply
    // lost), a stray copy of a fresh attempt, a queue node.
    if (op->sent_any) abandon(op->hold, abandon_call(*op, op->fsm.in_doubt()), op->lease);
    if (op->woken) on_release_published(op->name);  // pass the wake-up on
  }
  --op->hold->users;
  maybe_forget(op->hold);
  if (!status.ok()) {
    post(
        [done = std::move(op->done), status = std::move(status)]() mutable { done(Result<Lease>(std::move(status))); });
  }
}

// A wait ended: by how, and how long it took from the call.
void ClientCore::count_wait(const AcquireOp& op, const Status& status) {
  const auto took = std::chrono::duration_cast<std::chrono::microseconds>(now() - op.started).count();
  const std::uint64_t us = took > 0 ? static_cast<std::uint64_t>(took) : 0;
  if (status.ok())
    ++waits_granted_;
  else if (status.code() == Errc::timeout)
    ++waits_timed_out_;
  else
    ++waits_failed_;
  wait_time_us_sum_ += us;
  std::size_t bucket = 0;
  while (bucket < ClientStats::kWaitBucketsMs.size() && us > ClientStats::kWaitBucketsMs[bucket] * 1000) ++bucket;
  ++wait_buckets_[bucket];
}

AbandonCall ClientCore::abandon_call(const AcquireOp& op, bool in_doubt) const {
  AbandonCall call;
  call.name = op.name;
  call.owner = op.hold->owner;
  call.attempt = op.attempt;
  call.grant = op.sent_grant;
  call.held = op.sent_held;
  call.in_doubt = in_doubt || op.stray;
  if (op.stray) call.tombstone = op.lease;
  call.mode = op.hold->mode;
  call.line = op.queued;
  // An attempt that got no answer may have joined the waiters too.
  call.waited = op.may_wait && (op.busy_sent_at != Clock::time_point{} || call.in_doubt);
  return call;
}

// A cleanup of a fresh grant that was not sent, or got no answer, is sent
// again until the abandoned attempt's lease would have ended anyway:
// otherwise a grant made while the caller gave up (a frozen server
// answering late) would block the name for a whole lease. It names a grant
// id no later attempt uses (step() moves the op to a new one), so it cannot
// touch a later grant. A re-entry's cleanup shares the hold's grant with
// later calls: it is sent once, as before.
void ClientCore::abandon(const std::shared_ptr<Hold>& hold, AbandonCall call, milliseconds lease) {
  abandon_until(hold, std::move(call), now() + lease, milliseconds(50));
}

void ClientCore::abandon_until(const std::shared_ptr<Hold>& hold, AbandonCall call, Clock::time_point give_up,
                               milliseconds backoff) {
  ++hold->users;
  hold_exec(hold, [this, hold, call = std::move(call), give_up, backoff]() mutable {
    if (closing_) return abandons_queued_at_close_.push_back(std::move(call));
    ++abandons_out_;
    backend_->abandon(call, [this, hold, call, give_up, backoff](Status s) mutable {
      --abandons_out_;
      // Shutdown waits for it: a cleanup may take a second request (a
      // script the server no longer has), which a closed connection would
      // never send, leaving a place or a hand-over to hold the line.
      if (closing_) return closing_call_done();
      --hold->users;
      hold_op_done(hold);
      if (s.ok()) return;
      if (transient(s.code()) && call.held == 0 && now() + backoff < give_up) {
        auto timer = std::make_shared<asio::steady_timer>(rt_->io, backoff);
        abandon_timers_.emplace(timer, call);
        timer->async_wait([this, hold, call = std::move(call), give_up, backoff, timer](const error_code& ec) mutable {
          abandon_timers_.erase(timer);
          if (ec || closing_) return;
          abandon_until(hold, std::move(call), give_up, std::min(backoff * 2, milliseconds(1000)));
        });
        return;
      }
      log(LogLevel::warning, "cleanup after an acquire of '" + hold->name +
                                 "' that ended without a grant failed (it expires with its lease): " + s.to_string());
    });
  });
}

// Wakes one waiter per release: the others would only find it taken again.
// An attempt in flight remembers the release for its answer (a busy answer
// may predate it). step() may finish an op, which erases it from the list:
// the loop walks a copy.
// A queue backend names the attempt whose predecessor went: only it is woken,
// even before it joined the waiters (its first busy answer, which set the
// backend's watches, may come after the release it awaits).
void ClientCore::on_release_published(const std::string& name, std::uint64_t attempt) {
  auto it = waiters_.find(name);
  if (attempt != 0 && (it == waiters_.end() || std::none_of(it->second.begin(), it->second.end(),
                                                            [&](const auto& op) { return op->attempt == attempt; }))) {
    for (const auto& op : live_ops_)
      if (op->attempt == attempt && op->name == name && !op->finished && op->fsm.attempting())
        (void)op->fsm.on_wake(this->now());
    return;
  }
  if (it == waiters_.end()) return;
  const auto now = this->now();
  const std::vector<std::shared_ptr<AcquireOp>> ops(it->second.begin(), it->second.end());
  bool woke = false;
  for (const auto& op : ops) {
    if (op->finished || (attempt != 0 && op->attempt != attempt)) continue;
    if (op->fsm.attempting()) {
      (void)op->fsm.on_wake(now);
      continue;
    }
    if (woke) continue;
    auto action = op->fsm.on_wake(now);
    if (action.kind == AcquireFsm::Action::Kind::none) continue;
    woke = true;
    wakeups_.fetch_add(1, std::memory_order_relaxed);
    op->woken = true;
    op->timer.cancel();
    step(op, action);
  }
}

// A line granted one of this client's waiters inside another's call. A
// waiter with an attempt out learns it from that attempt's answer (the line
// answers a caller it granted as granted); an idle one is granted here, its
// lease counted from its newest busy attempt's send time (the hand-over came
// after that attempt found the lock busy). Anything else (the waiter gave up
// meanwhile: its abandon removes the hold) is left alone. The name's other
// waiters sleep on, but no longer than the grant's lease: a recipient that
// died holds it until then, and nothing is published when that runs out.
// One whose attempt is out waits no longer than that after its answer.
void ClientCore::on_handed(const HandOver& to) {
  auto it = waiters_.find(to.name);
  if (it == waiters_.end()) return;
  std::shared_ptr<AcquireOp> op;
  for (const auto& w : it->second)
    if (!w->finished && w->hold->owner == to.owner && w->fresh_grant == to.grant) op = w;
  if (to.lease.count() > 0) {
    const auto by = now() + to.lease;
    for (const auto& w : it->second) {
      if (w == op || w->finished) continue;
      if (w->fsm.attempting()) {
        w->wake_by = std::min(w->wake_by, by);  // its answer may predate the hand-over
        continue;
      }
      if (w->timer.expiry() > by) wake_at(w, by);  // cancels the wait armed for later
    }
  }
  if (!op) return;
  wakeups_.fetch_add(1, std::memory_order_relaxed);
  const auto now = this->now();
  if (op->fsm.attempting() || op->hold->depth.load() != 0 || op->hold->op_busy ||
      op->busy_sent_at == Clock::time_point{}) {
    // Its next attempt (at once, or right after the one out) finds the grant.
    auto action = op->fsm.on_wake(now);
    if (action.kind == AcquireFsm::Action::Kind::none) return;
    op->timer.cancel();
    return step(op, action);
  }
  op->timer.cancel();
  op->sent_grant = to.grant;
  op->sent_held = 0;
  AcquireOutcome granted;
  granted.kind = AcquireOutcome::Kind::granted;
  granted.fence = to.fence;
  granted.depth = 1;
  on_attempt_answer(op, granted, op->busy_sent_at);
}

void ClientCore::wake_all() {
  const auto now = this->now();
  std::vector<std::shared_ptr<AcquireOp>> ops;
  for (auto& [name, list] : waiters_) ops.insert(ops.end(), list.begin(), list.end());
  for (auto& op : ops) {
    if (op->finished) continue;
    auto action = op->fsm.on_wake(now);
    if (action.kind == AcquireFsm::Action::Kind::none) continue;
    op->timer.cancel();
    step(op, action);
  }
}

}  // namespace dlock::detail

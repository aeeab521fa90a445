// The asynchronous acquire: the per-hold queue of script calls, the
// acquire state machine's driver, the waiter list and its wake-ups.
#include "client_core_internal.hpp"

#include "core/keys.hpp"
#include "core/token.hpp"
#include "core/transient.hpp"

namespace dlock::detail {

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
  if (Status bad = check_acquire(name, wait, options); !bad.ok()) {
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
      if (action.until != AcquireFsm::time_point::max()) {
        op->timer.expires_at(action.until);
        op->timer.async_wait([this, op](const error_code& ec) {
          if (ec || closing_ || op->finished) return;
          step(op, op->fsm.on_wake(Clock::now()));
        });
      }
      backend_->watch(op->name, [this, op](Status s) {
        if (closing_ || op->finished) return;
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
      op->timer.async_wait([this, op](const error_code& ec) {
        if (ec || closing_ || op->finished) return;
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
  hold_exec(op->hold, [this, op] {
    if (closing_) return;
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
    backend_->acquire(call, [this, op, sent_at](Result<AcquireOutcome> r) {
      if (closing_) return;
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
  ++hold->users;
  hold_exec(hold, [this, hold, held, grant, tombstone] {
    if (closing_) return;
    ReleaseCall call{hold->name, hold->owner, held + 1, false};
    call.grant = grant;
    call.tombstone = tombstone;
    backend_->release(call, [this, hold](Result<ReleaseOutcome> r) {
      if (closing_) return;
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

}  // namespace dlock::detail

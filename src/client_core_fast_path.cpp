// The blocking fast path: a fresh grant and its release on the caller's own
// thread (no hand-off to the I/O thread), and the hand-over of such grants
// to the I/O thread, which adopts them lazily.
#include <algorithm>

#include "client_core_internal.hpp"
#include "core/names.hpp"
#include "core/transient.hpp"

namespace dlock::detail {

std::optional<Result<Lease>> ClientCore::acquire_now(const std::string& name, milliseconds wait, const LockOptions& o,
                                                     AcquireSeed& seed) {
  if (!backend_ || on_io_thread()) return std::nullopt;
  if (Status bad = check_acquire(name, wait, o, caps_); !bad.ok()) return Result<Lease>(bad);
  const bool renew = !o.lease.has_value();
  const milliseconds lease = o.lease.value_or(o.watchdog_lease);
  AcquireCall call{name, o.owner, lease, 0};
  call.grant = next_grant_.fetch_add(1);
  call.attempt = next_attempt_.fetch_add(1);
  call.keep_place = wait.count() > 0;
  call.waits = call.keep_place;
  call.mode = seed.shape.mode;
  call.permits = seed.shape.permits;
  call.queued = queued(o, seed.shape);
  call.info = holder_info(o);
  const auto sent_at = now();
  const std::uint64_t session_ends = session_ends_.load();
  seed.started = sent_at;  // the wait that may follow counts from here
  if (to_wait(wait) != kForever) call.deadline = sent_at + (wait.count() > 0 ? wait : try_budget(options_, o));
  auto r = backend_->acquire_now(call);
  if (!r) return std::nullopt;
  seed.grant = call.grant;
  if (!r->ok()) {
    // The asynchronous path retries within error_retry and, if it stays in
    // doubt, undoes this grant.
    if (r->code() == Errc::outcome_unknown) {
      seed.stray = true;
      if (call.waits) seed.attempt = call.attempt;  // its copy may join the waiters under it
      outcome_unknown_.fetch_add(1, std::memory_order_relaxed);
    }
    seed.error = r->status();
    if (transient(r->code())) return std::nullopt;
    return Result<Lease>(r->status());
  }
  switch ((*r)->kind) {
    case AcquireOutcome::Kind::busy:
      busy_answers_.fetch_add(1, std::memory_order_relaxed);
      if (wait.count() == 0) return Result<Lease>(Status(Errc::busy, "the lock is held by another owner"));
      seed.attempt = call.attempt;  // a queue place, if the backend kept one, is the wait's
      return std::nullopt;          // waiting is the I/O thread's job
    case AcquireOutcome::Kind::lost:
    case AcquireOutcome::Kind::mismatch:
      return std::nullopt;
    case AcquireOutcome::Kind::granted:
      break;
  }
  if (now() >= valid_until(sent_at, lease)) {
    // Late: undone, and the asynchronous path tries again (same grant).
    late_grants_.fetch_add(1, std::memory_order_relaxed);
    ReleaseCall undo{name, o.owner, 1, false};
    undo.grant = call.grant;
    undo.mode = call.mode;
    auto u = backend_->release_now(undo);
    if (!u || !u->ok()) seed.stray = true;
    return std::nullopt;
  }
  auto hold = std::make_shared<Hold>(name, o.owner, call.mode);
  hold->line = call.queued;
  hold->fence.store((*r)->fence);
  hold->depth.store(1);
  hold->grant = call.grant;
  hold->lease = lease;
  hold->on_lost = o.on_lost;
  hold->valid_until_ns.store(
      ticks(caps_.needs_renewal ? valid_until(sent_at, lease) : (*r)->valid_until.value_or(Clock::time_point{})));
  hold->order.store(Hold::kFast);
  grants_.fetch_add(1, std::memory_order_relaxed);
  leases_held_.fetch_add(1, std::memory_order_relaxed);
  stage(hold, sent_at, renew ? o.renew_interval : lease, renew, session_ends);
  return Result<Lease>(Lease(weak_from_this(), std::move(hold)));
}

// Hands a fast grant to the I/O thread, waking it only if the grant needs
// attention (its first renewal, or its expiry) before the armed timer.
void ClientCore::stage(std::shared_ptr<Hold> hold, Clock::time_point sent_at, milliseconds interval, bool renew,
                       std::uint64_t session_ends) {
  const auto due = renew ? sent_at + interval : valid_until(sent_at, hold->lease);
  bool wake = false;
  {
    std::lock_guard lk(stage_mu_);
    staged_.push_back({std::move(hold), sent_at, interval, renew, session_ends});
    staged_due_ = std::min(staged_due_, due);
    wake = due < armed_;
    if (wake) armed_ = due;  // one wake-up is enough for everything staged before it
  }
  // No reference to *this: a handler holding one could become the last
  // owner, and the Client's destructor would then return before the shutdown
  // ran. None is needed: *this outlives every handler (backend.hpp's rule).
  if (wake)
    post([this] {
      if (closing_) return;
      adopt_staged();
      rearm_renewal();
    });
}

std::optional<Status> ClientCore::release_now(const std::shared_ptr<Hold>& hold) {
  if (!backend_ || on_io_thread() || hold->depth.load() != 1 || hold->lost.load()) return std::nullopt;
  // Claimed, or the I/O thread orders this hold's calls: then the release
  // queues there behind whatever it runs (a re-entry of a shared Mutex).
  std::uint8_t fast = Hold::kFast;
  if (!hold->order.compare_exchange_strong(fast, Hold::kFastReleasing)) return std::nullopt;
  std::optional<Staged> staged;
  {
    std::lock_guard lk(stage_mu_);
    auto it = std::find_if(staged_.begin(), staged_.end(), [&](const Staged& s) { return s.hold == hold; });
    if (it != staged_.end()) {
      staged = std::move(*it);
      staged_.erase(it);
    }
  }
  const bool was_staged = staged.has_value();
  hold->releasing.store(true);
  ReleaseCall call{hold->name, hold->owner, 1, false};
  call.grant = hold->grant;
  call.mode = hold->mode;  // a shared hold is released where it lives
  std::optional<Result<ReleaseOutcome>> r;
  int tries = 0;
  for (;; ++tries) {
    auto next = backend_->release_now(call);
    if (!next) break;  // not offered (this time): the last answer stands, or the I/O thread sends it
    r = std::move(next);
    if (!r->ok() && r->code() == Errc::outcome_unknown) outcome_unknown_.fetch_add(1, std::memory_order_relaxed);
    if (r->ok() || r->code() != Errc::outcome_unknown || tries == 2) break;
  }
  if (!r) {
    // The backend offered no blocking call after all (its pool was busy):
    // the release must still go out, so the I/O thread sends it, after
    // whatever it queued on the hold meanwhile. Dropping it left the lock
    // held for a whole lease.
    hold->releasing.store(false);
    if (staged) {
      std::lock_guard lk(stage_mu_);
      staged_.push_back(std::move(*staged));
    }
    post([this, hold] {
      if (!closing_) fast_release_done(hold);
    });
    return std::nullopt;
  }
  const Status status = release_result(*r, 1, tries, hold->name).second;
  hold->depth.store(0);
  leases_held_.fetch_sub(1, std::memory_order_relaxed);
  // A hold the I/O thread never adopted, with no call awaiting this end,
  // needs nothing from it: one wake-up less per pair.
  std::uint8_t claimed = Hold::kFastReleasing;
  if (was_staged && hold->order.compare_exchange_strong(claimed, Hold::kIo)) return status;
  post([this, hold, was_staged] {
    if (closing_) return;
    if (!was_staged) retire(hold);
    fast_release_done(hold);
  });
  return status;
}

// I/O thread: the fast release claimed by release_now is over; calls queued
// on the hold meanwhile run now, and see it released.
void ClientCore::fast_release_done(const std::shared_ptr<Hold>& hold) {
  hold->order.store(Hold::kIo);
  if (hold->op_busy) hold_op_done(hold);
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
  std::vector<std::pair<std::shared_ptr<Hold>, LossReason>> lost;
  for (Staged& s : staged) {
    Hold& h = *s.hold;
    if (h.depth.load() == 0) continue;
    holds_[{h.name, h.owner, h.mode}] = s.hold;  // replaces a finished hold of the same owner
    h.id = next_id_++;
    scheduled_[h.id] = s.hold;
    if (caps_.needs_renewal) scheduler_.add(h.id, s.sent_at, h.lease, s.interval, s.renew);
    added = true;
    if (s.session_ends != session_ends_.load()) {
      lost.emplace_back(s.hold, session_end_reason_);
    } else if (auto it = lost_unstaged_.find(h.grant); it != lost_unstaged_.end()) {
      lost.emplace_back(s.hold, it->second);
      lost_unstaged_.erase(it);
    }
  }
  if (added) rearm_renewal();
  for (auto& [hold, reason] : lost) mark_lost(hold, reason);
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

// Liveness: the watchdog (batched renewals on the scheduler's ticks) for
// backends whose holds need renewal, the session's pushed liveness for the
// others, and the loss signal either way.
#include <algorithm>

#include "client_core_internal.hpp"

namespace dlock::detail {

namespace {
// Renewal scripts are split so one script never blocks Redis for long.
constexpr std::size_t kRenewBatch = 1000;
}  // namespace

void ClientCore::mark_lost(const std::shared_ptr<Hold>& hold, LossReason reason) {
  if (hold->lost.exchange(true)) return;
  scheduler_.remove(hold->id);
  scheduled_.erase(hold->id);
  leases_lost_.fetch_add(1, std::memory_order_relaxed);
  if (const auto i = static_cast<std::size_t>(reason); i < lost_by_reason_.size())
    lost_by_reason_[i].fetch_add(1, std::memory_order_relaxed);
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
    if (next == Clock::time_point::max() && armed_ != Clock::time_point::max() && armed_ > now()) return;
    armed_ = next;
  }
  if (next == Clock::time_point::max()) {
    renew_timer_->cancel();
    return;
  }
  renew_timer_->expires_at(next);
  renew_timer_->async_wait([this](const error_code& ec) {
    if (ec || closing_) return;
    on_renewal_timer();
  });
}

void ClientCore::on_renewal_timer() {
  adopt_staged();
  const auto now = this->now();
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
      calls.push_back({hold->name, hold->owner, hold->grant, hold->lease, hold->mode, hold->line});
    }
    if (calls.empty()) continue;
    renewal_round_trips_.fetch_add(1, std::memory_order_relaxed);
    backend_->renew(calls, [this, ids = std::move(ids), sent_at = now](Result<std::vector<RenewOutcome>> r) {
      if (closing_) return;
      if (!r.ok() && r.code() == Errc::outcome_unknown) outcome_unknown_.fetch_add(1, std::memory_order_relaxed);
      for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto id = ids[i];
        if (!scheduler_.contains(id)) continue;  // released or lost meanwhile
        auto hold = scheduled_[id].lock();
        if (!hold || hold->releasing.load()) continue;
        if (!r.ok()) {
          // Counted from the send: the renewal could not have confirmed
          // anything later than that.
          scheduler_.failed(id, sent_at);
          renewal_failures_.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        switch ((*r)[i]) {
          case RenewOutcome::renewed:
            scheduler_.renewed(id, sent_at);
            renewals_.fetch_add(1, std::memory_order_relaxed);
            hold->valid_until_ns.store(ticks(scheduler_.valid_until(id)));
            break;
          case RenewOutcome::expired:
            mark_lost(hold, LossReason::expired);
            break;
          case RenewOutcome::taken:
            mark_lost(hold, LossReason::taken);
            break;
          case RenewOutcome::wrong_type:
            mark_lost(hold, LossReason::wrong_type);
            break;
          case RenewOutcome::unconfirmed:
            scheduler_.failed(id, sent_at);
            renewal_failures_.fetch_add(1, std::memory_order_relaxed);
            break;
        }
      }
      if (!r.ok())
        log(LogLevel::warning,
            "lease renewal failed (retrying until the leases can no longer be confirmed): " + r.status().to_string());
      rearm_renewal();
    });
  }
  rearm_renewal();
}

// The backend says these holds are gone (empty: all of them, a session
// expired). A grant id of 0 matches any grant.
void ClientCore::on_holds_lost(const std::vector<HoldRef>& refs, LossReason reason) {
  if (refs.empty()) {
    session_end_reason_ = reason;
    session_ends_.fetch_add(1);  // before the adoption: a grant staged after it is lost when adopted
  }
  adopt_staged();  // fast grants not yet handed over are held too
  std::vector<std::shared_ptr<Hold>> gone;
  for (auto& [key, hold] : holds_) {
    if (hold->depth.load() == 0 || hold->lost.load()) continue;
    const bool match =
        refs.empty() || std::any_of(refs.begin(), refs.end(), [&](const HoldRef& r) {
          return r.name == hold->name && r.owner == hold->owner && (r.grant == 0 || r.grant == hold->grant);
        });
    if (match) gone.push_back(hold);
  }
  // A named grant not found may be a fast grant its caller has yet to stage.
  for (const HoldRef& r : refs) {
    if (r.grant == 0 || std::any_of(gone.begin(), gone.end(), [&](const auto& h) { return h->grant == r.grant; }))
      continue;
    if (lost_unstaged_.size() >= 1024) lost_unstaged_.clear();
    lost_unstaged_[r.grant] = reason;
  }
  for (const auto& hold : gone) mark_lost(hold, reason);
}

// Backends without renewal: the session vouches for every hold until then.
void ClientCore::on_alive_until(Clock::time_point until) {
  adopt_staged();
  session_until_ = until;
  for (auto& [key, hold] : holds_)
    if (hold->depth.load() > 0 && !hold->lost.load()) hold->valid_until_ns.store(ticks(until));
}

}  // namespace dlock::detail

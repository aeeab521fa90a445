#include "core/renewal_scheduler.hpp"

#include <algorithm>

namespace dlock::detail {
namespace {
milliseconds retry_delay(milliseconds interval) {
  return std::clamp(interval / 4, milliseconds(10), milliseconds(1000));
}
}  // namespace

void RenewalScheduler::add(Id id, time_point sent_at, milliseconds lease, milliseconds interval, bool renew) {
  Entry e;
  e.lease = lease;
  e.interval = interval;
  e.renew = renew;
  e.valid_until = detail::valid_until(sent_at, lease);
  e.next_due = sent_at + interval;
  if (renew) {
    // Join the next tick of this interval's phase (never later than one
    // interval from now): all leases of one interval share one batch.
    auto [it, fresh] = phase_.try_emplace(interval, e.next_due);
    if (!fresh) {
      time_point& tick = it->second;
      if (tick <= sent_at) tick += interval * ((sent_at - tick) / interval + 1);
      e.next_due = std::min(e.next_due, tick);
    }
  }
  entries_[id] = e;
}

void RenewalScheduler::remove(Id id) { entries_.erase(id); }

std::vector<RenewalScheduler::Id> RenewalScheduler::take_due(time_point now) {
  std::vector<Id> due;
  for (auto& [id, e] : entries_) {
    if (!e.renew || e.in_flight) continue;
    // Early by up to half an interval: renewing early is harmless (the
    // lease is several intervals long) and lets leases granted at different
    // times share one round trip from the first tick on.
    if (e.next_due <= now + e.interval / 2) {
      e.in_flight = true;
      due.push_back(id);
    }
  }
  return due;
}

void RenewalScheduler::renewed(Id id, time_point sent_at) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  e.in_flight = false;
  e.valid_until = std::max(e.valid_until, detail::valid_until(sent_at, e.lease));
  e.next_due = sent_at + e.interval;
  e.failing_since.reset();
  phase_[e.interval] = e.next_due;
}

void RenewalScheduler::failed(Id id, time_point now) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  e.in_flight = false;
  if (!e.failing_since) e.failing_since = now;
  e.next_due = now + retry_delay(e.interval);
}

void RenewalScheduler::link_down(time_point now) {
  for (auto& [id, e] : entries_) {
    if (!e.renew) continue;
    if (!e.failing_since) e.failing_since = now;
    if (!e.in_flight) e.next_due = now;
  }
}

RenewalScheduler::time_point RenewalScheduler::loss_deadline(const Entry& e) {
  time_point d = e.valid_until;
  if (e.renew && e.failing_since) d = std::min(d, *e.failing_since + e.interval);
  return d;
}

std::vector<std::pair<RenewalScheduler::Id, LossReason>> RenewalScheduler::take_lost(time_point now) {
  std::vector<std::pair<Id, LossReason>> lost;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (now >= loss_deadline(it->second)) {
      lost.emplace_back(it->first, it->second.renew ? LossReason::unreachable : LossReason::expired);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  return lost;
}

std::optional<RenewalScheduler::time_point> RenewalScheduler::next_wakeup() const {
  std::optional<time_point> next;
  for (const auto& [id, e] : entries_) {
    time_point t = loss_deadline(e);
    if (e.renew && !e.in_flight) t = std::min(t, e.next_due);
    if (!next || t < *next) next = t;
  }
  return next;
}

RenewalScheduler::time_point RenewalScheduler::valid_until(Id id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? time_point{} : it->second.valid_until;
}

}  // namespace dlock::detail

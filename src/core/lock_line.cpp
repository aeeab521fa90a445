#include "core/lock_line.hpp"

#include <algorithm>

namespace dlock::detail {
namespace {

template <class T>
bool is(const T& e, const std::string& owner, std::uint64_t grant) {
  return e.owner == owner && e.grant == grant;
}

bool compatible(const LineState& s, LockMode mode) {
  if (mode == LockMode::exclusive) return s.holders.empty();
  for (const auto& h : s.holders)
    if (h.mode == LockMode::exclusive) return false;
  return s.permits == 0 || s.holders.size() < s.permits;
}

void purge(LineState& s, std::int64_t now) {
  std::erase_if(s.holders, [&](const LineHolder& h) { return h.expires_ms <= now; });
  std::erase_if(s.line, [&](const LineWaiter& w) { return w.expires_ms <= now; });
  std::erase_if(s.tombs, [&](const LineTomb& t) { return t.until_ms <= now; });
}

std::vector<Handed> promote(LineState& s, std::int64_t now, const NextFence& next_fence) {
  std::vector<Handed> out;
  while (!s.line.empty() && compatible(s, s.line.front().mode)) {
    LineWaiter w = std::move(s.line.front());
    s.line.erase(s.line.begin());
    LineHolder h{w.owner, w.grant, w.mode, 1, next_fence(), now + w.lease_ms, std::move(w.info), now};
    out.push_back({h.owner, h.grant, h.fence, w.lease_ms});
    s.holders.push_back(std::move(h));
  }
  return out;
}

WaitHint busy_hint(const LineState& s, std::int64_t now, const AcquireCall& call) {
  std::int64_t until = kNoExpiry;
  for (const auto& h : s.holders) until = std::min(until, h.expires_ms);
  if (s.holders.empty())
    for (const auto& w : s.line) until = std::min(until, w.expires_ms);
  std::int64_t after = until == kNoExpiry ? -1 : std::max<std::int64_t>(until - now, 0);
  if (call.queued) {  // the heartbeat that keeps the caller's place
    const std::int64_t beat = std::max<std::int64_t>(call.lease.count() / 3, 1);
    after = after < 0 ? beat : std::min(after, beat);
  }
  return after < 0 ? WaitHint::event() : WaitHint::expiry(milliseconds(after));
}

void add_tomb(LineState& s, const std::string& owner, std::uint64_t grant, milliseconds for_ms, std::int64_t now) {
  if (for_ms.count() > 0) s.tombs.push_back({owner, grant, now + for_ms.count()});
}

// Removes the holder at `it` after its last level, and promotes.
std::vector<Handed> drop_holder(LineState& s, std::vector<LineHolder>::iterator it, std::int64_t now,
                                const NextFence& next_fence) {
  s.holders.erase(it);
  return promote(s, now, next_fence);
}

}  // namespace

std::vector<Handed> line_settle(LineState& s, std::int64_t now_ms, const NextFence& next_fence) {
  purge(s, now_ms);
  return promote(s, now_ms, next_fence);
}

LineAcquire line_acquire(LineState& s, const AcquireCall& call, std::int64_t now, const NextFence& next_fence) {
  LineAcquire r;
  r.handed = line_settle(s, now, next_fence);
  AcquireOutcome& out = r.outcome;
  auto mine = std::find_if(s.holders.begin(), s.holders.end(),
                           [&](const LineHolder& h) { return is(h, call.owner, call.grant); });
  if (mine != s.holders.end()) {
    // Granted already: a re-entry, a replay, or this caller's own hand-over.
    std::erase_if(r.handed, [&](const Handed& h) { return is(h, call.owner, call.grant); });
    if (mine->depth == call.held) {
      ++mine->depth;
    } else if (mine->depth != call.held + 1) {
      out.kind = AcquireOutcome::Kind::mismatch;
      out.depth = mine->depth;
      return r;
    }
    mine->expires_ms = std::max(mine->expires_ms, now + call.lease.count());
    out.kind = AcquireOutcome::Kind::granted;
    out.fence = mine->fence;
    out.depth = mine->depth;
    return r;
  }
  const bool tombed =
      std::any_of(s.tombs.begin(), s.tombs.end(), [&](const LineTomb& t) { return is(t, call.owner, call.grant); });
  if (call.held > 0 || tombed) {
    out.kind = AcquireOutcome::Kind::lost;
    return r;
  }
  for (const auto& h : s.holders) {
    if (h.owner == call.owner && h.mode != call.mode) {
      r.error =
          Status(Errc::precondition_failed, std::string("this owner holds the lock ") +
                                                (h.mode == LockMode::shared ? "shared and asked for it exclusively"
                                                                            : "exclusively and asked for it shared") +
                                                ": a change of mode would wait for itself (release first)");
      return r;
    }
  }
  const unsigned permits = call.mode == LockMode::shared ? call.permits : 0;
  if (call.mode == LockMode::shared) {
    const bool any_shared =
        std::any_of(s.holders.begin(), s.holders.end(), [](const auto& h) { return h.mode == LockMode::shared; }) ||
        std::any_of(s.line.begin(), s.line.end(), [](const auto& w) { return w.mode == LockMode::shared; });
    if (any_shared && s.permits != permits) {
      r.error = Status(Errc::invalid_argument,
                       "permits disagree: the lock is used with " +
                           (s.permits == 0 ? std::string("no limit (a read lock)") : std::to_string(s.permits)) +
                           " and this call asked for " +
                           (permits == 0 ? std::string("no limit (a read lock)") : std::to_string(permits)));
      return r;
    }
    if (!any_shared) s.permits = permits;
  }
  auto place =
      std::find_if(s.line.begin(), s.line.end(), [&](const LineWaiter& w) { return is(w, call.owner, call.grant); });
  const bool first = place == s.line.begin();  // nobody ahead (or nobody in line at all)
  if (first && compatible(s, call.mode)) {
    if (place != s.line.end()) s.line.erase(place);
    LineHolder h{call.owner, call.grant, call.mode, 1, next_fence(), now + call.lease.count(), call.info, now};
    out.kind = AcquireOutcome::Kind::granted;
    out.fence = h.fence;
    out.depth = 1;
    s.holders.push_back(std::move(h));
    return r;
  }
  if (call.queued) {
    if (place == s.line.end()) {
      s.line.push_back({call.owner, call.grant, call.mode, s.next_ticket++, call.lease.count(),
                        now + call.lease.count(), call.info});
    } else {
      place->expires_ms = now + call.lease.count();
    }
  }
  out.kind = AcquireOutcome::Kind::busy;
  out.hint = busy_hint(s, now, call);
  return r;
}

LineRelease line_release(LineState& s, const ReleaseCall& call, std::int64_t now, const NextFence& next_fence) {
  LineRelease r;
  r.handed = line_settle(s, now, next_fence);
  ReleaseOutcome& out = r.outcome;
  add_tomb(s, call.owner, call.grant, call.tombstone, now);
  auto mine = std::find_if(s.holders.begin(), s.holders.end(),
                           [&](const LineHolder& h) { return is(h, call.owner, call.grant); });
  if (mine == s.holders.end()) {
    const bool taken =
        std::any_of(s.holders.begin(), s.holders.end(), [](const auto& h) { return h.mode == LockMode::exclusive; });
    out.kind = taken ? ReleaseOutcome::Kind::not_owner : ReleaseOutcome::Kind::not_held;
    return r;
  }
  if (call.all || mine->depth == call.held) {
    const unsigned left = call.all ? 0 : mine->depth - 1;
    out.depth = left;
    if (left == 0) {
      auto more = drop_holder(s, mine, now, next_fence);
      r.handed.insert(r.handed.end(), more.begin(), more.end());
    } else {
      mine->depth = left;
    }
    return r;
  }
  out.depth = mine->depth;
  if (mine->depth != call.held - 1) out.kind = ReleaseOutcome::Kind::mismatch;  // not a replay either
  return r;
}

std::vector<Handed> line_abandon(LineState& s, const AbandonCall& call, std::int64_t now, const NextFence& next_fence) {
  std::vector<Handed> handed = line_settle(s, now, next_fence);
  std::erase_if(s.line, [&](const LineWaiter& w) { return is(w, call.owner, call.grant); });
  add_tomb(s, call.owner, call.grant, call.tombstone, now);
  auto mine = std::find_if(s.holders.begin(), s.holders.end(),
                           [&](const LineHolder& h) { return is(h, call.owner, call.grant); });
  // Only the level the abandoned attempt may have added: a re-entry's undo
  // leaves the levels held before it.
  if (mine != s.holders.end() && mine->depth == call.held + 1) {
    if (call.held == 0) {
      auto more = drop_holder(s, mine, now, next_fence);
      handed.insert(handed.end(), more.begin(), more.end());
    } else {
      --mine->depth;
    }
  }
  std::erase_if(handed, [&](const Handed& h) { return is(h, call.owner, call.grant); });
  // The line may have moved even when nothing was held (the abandoned waiter
  // was the head): promote once more.
  auto more = promote(s, now, next_fence);
  handed.insert(handed.end(), more.begin(), more.end());
  return handed;
}

RenewOutcome line_renew(LineState& s, const RenewCall& call, std::int64_t now) {
  purge(s, now);
  for (auto& h : s.holders) {
    if (is(h, call.owner, call.grant)) {
      h.expires_ms = now + call.lease.count();
      return RenewOutcome::renewed;
    }
  }
  for (auto& w : s.line) {
    if (is(w, call.owner, call.grant)) {
      w.expires_ms = now + call.lease.count();
      return RenewOutcome::renewed;
    }
  }
  for (const auto& h : s.holders)
    if (h.mode == LockMode::exclusive) return RenewOutcome::taken;
  return RenewOutcome::expired;
}

LockInfo line_info(const LineState& s, std::int64_t now) {
  LockInfo info;
  info.waiters = static_cast<unsigned>(
      std::count_if(s.line.begin(), s.line.end(), [&](const LineWaiter& w) { return w.expires_ms > now; }));
  // The oldest live grant speaks for the lock (a leader, a writer, the first reader).
  const LineHolder* first = nullptr;
  unsigned live = 0;
  for (const auto& h : s.holders) {
    if (h.expires_ms <= now) continue;
    ++live;
    if (first == nullptr || h.fence < first->fence) first = &h;
  }
  if (first == nullptr) return info;
  info.held = true;
  info.fence = first->fence;
  info.reentry_count = first->depth;
  info.holder = first->info;
  if (first->granted_ms > 0) info.held_for = milliseconds(std::max<std::int64_t>(now - first->granted_ms, 0));
  info.holders = live;
  info.shared = first->mode == LockMode::shared;
  if (first->expires_ms != kNoExpiry) info.remaining = milliseconds(std::max<std::int64_t>(first->expires_ms - now, 0));
  return info;
}

}  // namespace dlock::detail

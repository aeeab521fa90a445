#include "redlock/redlock_acquire.hpp"

#include <algorithm>

#include "core/quorum.hpp"
#include "core/transient.hpp"

namespace dlock::detail {

RedlockAcquire::RedlockAcquire(const AcquireCall& call, time_point start, milliseconds per_node, Nodes nodes,
                               std::function<std::uint64_t()> rng)
    : call_(call),
      round_(nodes.names->size(), call.lease, start),
      per_node_(per_node),
      start_(start),
      nodes_(nodes),
      rng_(std::move(rng)),
      votes_(nodes.names->size(), Vote::pending),
      replied_(nodes.names->size(), false),
      outcomes_(nodes.names->size()),
      errors_(nodes.names->size()) {}

RedlockAcquire::time_point RedlockAcquire::timer_at() const { return std::min(start_ + per_node_, round_.deadline()); }

// A script's definite "no" wrote nothing on that node.
bool RedlockAcquire::wrote_nothing(std::size_t i) const {
  return votes_[i] == Vote::busy || votes_[i] == Vote::lost || votes_[i] == Vote::mismatch ||
         (votes_[i] == Vote::error && !transient(errors_[i].code()) && replied_[i]);
}

RedlockAcquire::Effects RedlockAcquire::deliver(Result<AcquireOutcome> r) {
  phase_ = Phase::done;
  Effects e;
  e.report = std::move(r);
  return e;
}

RedlockAcquire::Effects RedlockAcquire::on_answer(std::size_t i, const Result<AcquireOutcome>& res, time_point now) {
  replied_[i] = true;
  if (votes_[i] == Vote::pending) {
    if (!res.ok()) {
      votes_[i] = Vote::error;
      errors_[i] = res.status();
    } else {
      outcomes_[i] = *res;
      switch (res->kind) {
        case AcquireOutcome::Kind::granted:
          votes_[i] = Vote::granted;
          break;
        case AcquireOutcome::Kind::busy:
          votes_[i] = Vote::busy;
          break;
        case AcquireOutcome::Kind::lost:
          votes_[i] = Vote::lost;
          break;
        case AcquireOutcome::Kind::mismatch:
          votes_[i] = Vote::mismatch;
          break;
      }
    }
  }
  switch (phase_) {
    case Phase::voting:
      round_.vote(i, votes_[i] == Vote::granted, now);
      return decide(now);
    case Phase::fence_wait:
      return i == 0 ? grant() : Effects{};
    case Phase::undoing:
    case Phase::done:
      break;
  }
  // After a failure, undo what this answer may have granted.
  const bool counted = phase_ == Phase::undoing && !timed_out_;
  if (round_.decision() == RedlockRound::Decision::failed &&
      (!res.ok() || res->kind == AcquireOutcome::Kind::granted)) {
    Effects e;
    e.undo.push_back({i, counted});
    return e;
  }
  if (counted && --undo_waiting_ == 0) return deliver(std::move(*report_));
  return {};
}

RedlockAcquire::Effects RedlockAcquire::on_timer(time_point now) {
  timed_out_ = true;
  switch (phase_) {
    case Phase::voting:
      for (std::size_t i = 0; i < votes_.size(); ++i) {
        if (votes_[i] != Vote::pending) continue;
        votes_[i] = Vote::error;
        // A node we are not connected to most likely never got the request.
        const std::string& name = (*nodes_.names)[i];
        errors_[i] = (*nodes_.connected)[i]
                         ? Status(Errc::outcome_unknown,
                                  name + " did not answer within " + std::to_string(per_node_.count()) + " ms")
                         : Status(Errc::unavailable, name + " is not connected");
        round_.vote(i, false, now);
      }
      return decide(now);
    case Phase::fence_wait:
      return grant();  // without node 0's fence
    case Phase::undoing:
      return deliver(std::move(*report_));  // silent nodes are undone if they answer
    case Phase::done:
      return {};
  }
  return {};
}

RedlockAcquire::Effects RedlockAcquire::on_undo_answer(bool counted) {
  if (counted && phase_ == Phase::undoing && --undo_waiting_ == 0) return deliver(std::move(*report_));
  return {};
}

RedlockAcquire::Effects RedlockAcquire::grant() {
  AcquireOutcome out;
  out.kind = AcquireOutcome::Kind::granted;
  for (std::size_t i = 0; i < votes_.size(); ++i)
    if (votes_[i] == Vote::granted && (out.depth == 0 || outcomes_[i].depth < out.depth))
      out.depth = outcomes_[i].depth;
  // The designated fence node: node 0's counter, only if it granted too.
  out.fence = votes_[0] == Vote::granted ? outcomes_[0].fence : 0;
  return deliver(out);
}

RedlockAcquire::Effects RedlockAcquire::decide(time_point now) {
  const auto decision = round_.check(now);
  if (decision == RedlockRound::Decision::pending) return {};
  if (decision == RedlockRound::Decision::granted) {
    // Node 0 carries the fence: give a connected node 0 until the per-node
    // timeout to answer, so a healthy cluster hands out fences.
    if (votes_[0] == Vote::pending && (*nodes_.connected)[0] && !timed_out_) {
      phase_ = Phase::fence_wait;
      return {};
    }
    return grant();
  }
  report_ = failure();
  phase_ = Phase::undoing;
  Effects e;
  undo_waiting_ = 0;
  for (std::size_t i = 0; i < votes_.size(); ++i) {
    if (wrote_nothing(i)) continue;
    if (replied_[i]) e.undo.push_back({i, true});
    if (replied_[i] || !timed_out_) ++undo_waiting_;
  }
  if (undo_waiting_ == 0) return deliver(std::move(*report_));
  return e;
}

milliseconds RedlockAcquire::random_delay(milliseconds max) const {
  const auto span = static_cast<std::uint64_t>(std::max<std::int64_t>(max.count(), 1));
  return milliseconds(1 + static_cast<std::int64_t>(rng_() % span));
}

Result<AcquireOutcome> RedlockAcquire::failure() const {
  std::size_t granted = 0, busy = 0, lost = 0, mismatch = 0, errors = 0;
  milliseconds min_ttl{-2};  // the shortest holder lease among the busy votes
  bool no_expiry = false;
  std::vector<Status> errs;
  for (std::size_t i = 0; i < votes_.size(); ++i) {
    switch (votes_[i]) {
      case Vote::granted:
        ++granted;
        break;
      case Vote::busy: {
        ++busy;
        const WaitHint& hint = outcomes_[i].hint;
        if (hint.kind == WaitHint::Kind::expiry && hint.after.count() > 0 &&
            (min_ttl.count() <= 0 || hint.after < min_ttl))
          min_ttl = hint.after;
        if (hint.kind == WaitHint::Kind::event) no_expiry = true;
        break;
      }
      case Vote::lost:
        ++lost;
        break;
      case Vote::mismatch:
        ++mismatch;
        break;
      case Vote::error:
        ++errors;
        errs.push_back(errors_[i]);
        break;
      case Vote::pending:
        break;
    }
  }
  const std::size_t q = RedlockRound::quorum(votes_.size());
  AcquireOutcome out;
  // A re-entry whose hold is gone (or taken) on a majority is lost.
  if (lost >= q || (call_.held > 0 && lost + busy >= q)) {
    out.kind = AcquireOutcome::Kind::lost;
    return out;
  }
  if (mismatch >= q) {
    out.kind = AcquireOutcome::Kind::mismatch;
    out.depth = call_.held;
    return out;
  }
  if (granted >= q)
    return Status(Errc::unavailable, "Redlock: a majority granted the lock only after its validity (lease " +
                                         std::to_string(call_.lease.count()) + " ms) ran out; it was released");
  if (errors >= q) return quorum_failure(errs, votes_.size() - errors, votes_.size(), q, "acquire");
  out.kind = AcquireOutcome::Kind::busy;
  if (busy >= q) {
    out.hint = min_ttl.count() > 0 ? WaitHint::expiry(min_ttl)
               : no_expiry         ? WaitHint::event()
                                   : WaitHint::retry(random_delay(kSplitRetryMax));
  } else {
    // Split vote, or too few answers: nobody may hold a majority.
    out.hint = WaitHint::retry(random_delay(min_ttl.count() > 0 ? std::min(min_ttl, kSplitRetryMax) : kSplitRetryMax));
  }
  return out;
}

}  // namespace dlock::detail

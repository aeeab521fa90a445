#include "tx/tcc_machine.hpp"

#include <algorithm>
#include <optional>
#include <utility>

namespace dlock::tx::detail {

milliseconds backoff(int attempts, milliseconds base, milliseconds cap, double unit) {
  if (attempts < 1) return milliseconds(0);
  milliseconds d = base;
  for (int i = 1; i < attempts && d < cap; ++i) d *= 2;
  d = std::min(d, cap);
  unit = std::clamp(unit, 0.0, 1.0);
  return d / 2 + milliseconds(static_cast<milliseconds::rep>(static_cast<double>(d.count() - d.count() / 2) * unit));
}

TccMachine::TccMachine(State state, std::vector<BranchProgress> branches, Clock::time_point deadline, bool resumed)
    : state_(state), branches_(std::move(branches)), deadline_(deadline), resumed_(resumed) {}

Step TccMachine::next(Clock::time_point now) const {
  Step s;
  switch (state_) {
    case State::committed:
    case State::aborted:
      return s;  // done
    case State::committing:
    case State::aborting:
      return phase_two(now);
    case State::trying:
      break;
  }
  s.kind = Step::Kind::decide;
  s.to = State::aborting;
  if (resumed_) {
    s.reason = "its coordinator went away before deciding";
    return s;
  }
  for (std::size_t i = 0; i < branches_.size(); ++i)
    if (branches_[i].try_failed) {
      s.reason = "branch " + std::to_string(i) + " Try failed";
      if (!branches_[i].last_error.empty()) s.reason += ": " + branches_[i].last_error;
      return s;
    }
  if (now >= deadline_) {
    s.reason = "the Try phase passed its deadline";
    return s;
  }
  // Tries run in order: the first not yet tried is the one to (re)call.
  const auto untried = std::find_if(branches_.begin(), branches_.end(), [](const auto& b) { return !b.tried; });
  if (untried == branches_.end()) {
    s.to = State::committing;
    return s;
  }
  if (untried->not_before > now) {
    s.kind = Step::Kind::wait;
    s.until = std::min(untried->not_before, deadline_);
    return s;
  }
  s.kind = Step::Kind::call;
  s.branch = static_cast<int>(untried - branches_.begin());
  s.op = Op::try_;
  return s;
}

// Confirm (or Cancel) every branch not done, each on its own backoff: a
// branch that keeps failing does not hold up the others.
Step TccMachine::phase_two(Clock::time_point now) const {
  Step s;
  const Op op = state_ == State::committing ? Op::confirm : Op::cancel;
  std::optional<Clock::time_point> soonest;
  for (std::size_t i = 0; i < branches_.size(); ++i) {
    const auto& b = branches_[i];
    if (b.done) continue;
    if (b.not_before <= now) {
      s.kind = Step::Kind::call;
      s.branch = static_cast<int>(i);
      s.op = op;
      return s;
    }
    if (!soonest || b.not_before < *soonest) soonest = b.not_before;
  }
  if (soonest) {
    s.kind = Step::Kind::wait;
    s.until = *soonest;
    return s;
  }
  s.kind = Step::Kind::finish;
  s.to = state_ == State::committing ? State::committed : State::aborted;
  return s;
}

int TccMachine::on_call(int branch, Op op, Outcome outcome, std::string error, Clock::time_point now, double unit) {
  auto& b = branches_.at(static_cast<std::size_t>(branch));
  if (outcome == Outcome::success) {
    if (op == Op::try_)
      b.tried = true;
    else
      b.done = true;
    b.attempts = 0;
    b.last_error.clear();
    return 0;
  }
  ++b.attempts;
  b.last_error =
      error.empty() ? std::string(to_string(op)) + " answered " + std::string(to_string(outcome)) : std::move(error);
  if (op == Op::try_ && outcome == Outcome::failure) {
    b.try_failed = true;  // aborts; no retry
    return b.attempts;
  }
  if (op != Op::try_ && outcome == Outcome::failure)
    b.last_error = "contract violation: " + std::string(to_string(op)) + " failed definitely (" + b.last_error + ")";
  b.not_before = now + backoff(b.attempts, base_, cap_, unit);
  return b.attempts;
}

}  // namespace dlock::tx::detail

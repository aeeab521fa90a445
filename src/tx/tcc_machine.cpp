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
  return trying(now);
}

// The Try to (re)call now, the wait for the next one due, or commit once
// every Try succeeded. In order, only the first not yet tried may be called.
Step TccMachine::trying(Clock::time_point now) const {
  Step s;
  std::optional<std::size_t> due;
  std::optional<Clock::time_point> soonest;
  for (std::size_t i = 0; i < branches_.size() && !due; ++i) {
    const auto& b = branches_[i];
    if (b.tried) continue;
    if (b.not_before <= now)
      due = i;
    else if (!soonest || b.not_before < *soonest)
      soonest = b.not_before;
    if (!parallel_tries_) break;
  }
  if (due) {
    s.kind = Step::Kind::call;
    s.branch = static_cast<int>(*due);
    s.op = Op::try_;
  } else if (soonest) {
    s.kind = Step::Kind::wait;
    s.until = std::min(*soonest, deadline_);
  } else {
    s.kind = Step::Kind::decide;
    s.to = State::committing;
  }
  return s;
}

std::vector<Step> TccMachine::calls(Clock::time_point now) const {
  std::vector<Step> out;
  Step first = next(now);
  if (first.kind != Step::Kind::call) return out;
  const bool phase_two = decided(state_);
  const int from = first.branch;
  const Op op = first.op;
  out.push_back(std::move(first));
  if (!phase_two && !parallel_tries_) return out;
  for (std::size_t i = static_cast<std::size_t>(from) + 1; i < branches_.size(); ++i) {
    const auto& b = branches_[i];
    if ((phase_two ? b.done : b.tried) || b.not_before > now) continue;
    Step s;
    s.kind = Step::Kind::call;
    s.branch = static_cast<int>(i);
    s.op = op;
    out.push_back(std::move(s));
  }
  return out;
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

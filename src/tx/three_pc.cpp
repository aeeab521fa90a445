#include "tx/three_pc.hpp"

namespace dlock::tx::detail::three_pc {

const char* to_string(State s) {
  switch (s) {
    case State::initial:
      return "initial";
    case State::uncertain:
      return "uncertain";
    case State::prepared:
      return "prepared";
    case State::committed:
      return "committed";
    case State::aborted:
      return "aborted";
  }
  return "?";
}

std::vector<Send> Participant::decide(State to) {
  state_ = to;
  deadline_.reset();
  terminating_ = false;
  std::vector<Send> out;  // the others learn it (they may be waiting on their timers)
  for (int p = 1; p <= n_; ++p)
    if (p != self_) out.push_back({p, to == State::committed ? Msg::do_commit : Msg::abort});
  return out;
}

std::vector<Send> Participant::start_termination(Clock::time_point now) {
  terminating_ = true;
  heard_.assign(1, state_);
  deadline_ = now + timeout_;
  std::vector<Send> out;
  for (int p = 1; p <= n_; ++p)
    if (p != self_) out.push_back({p, Msg::state_req});
  return out;
}

std::vector<Send> Participant::on_message(int from, Msg m, State their_state, Clock::time_point now) {
  if (m == Msg::state_req) return {{from, Msg::state_reply, state_}};
  if (decided()) return {};
  switch (m) {
    case Msg::can_commit:
      if (state_ != State::initial) return {};
      if (!vote_yes_) {
        state_ = State::aborted;  // a no vote may abort at once
        return {{0, Msg::no}};
      }
      state_ = State::uncertain;
      deadline_ = now + timeout_;
      return {{0, Msg::yes}};
    case Msg::pre_commit:
      if (state_ != State::uncertain) return {};
      state_ = State::prepared;
      terminating_ = false;
      deadline_ = now + timeout_;
      return {{0, Msg::ack}};
    case Msg::do_commit:
      state_ = State::committed;
      deadline_.reset();
      return {};
    case Msg::abort:
      state_ = State::aborted;
      deadline_.reset();
      return {};
    case Msg::state_reply:
      if (terminating_) heard_.push_back(their_state);
      if (terminating_ && static_cast<int>(heard_.size()) == n_) return on_tick(*deadline_);  // all answered
      return {};
    default:
      return {};
  }
}

std::vector<Send> Participant::on_tick(Clock::time_point now) {
  if (decided() || !deadline_ || now < *deadline_) return {};  // a timer runs only once it voted
  if (!terminating_) return start_termination(now);
  // The termination rule over what this side of the network said.
  bool any_committed = false, any_aborted = false, any_prepared = false;
  for (State s : heard_) {
    any_committed |= s == State::committed;
    any_aborted |= s == State::aborted || s == State::initial;
    any_prepared |= s == State::prepared;
  }
  if (any_committed) return decide(State::committed);
  if (any_aborted) return decide(State::aborted);
  return decide(any_prepared ? State::committed : State::aborted);
}

std::vector<Send> Coordinator::to_all(Msg m) {
  std::vector<Send> out;
  for (int p = 1; p <= n_; ++p) out.push_back({p, m});
  return out;
}

std::vector<Send> Coordinator::start(Clock::time_point now) {
  phase_ = Phase::votes;
  answers_ = 0;
  deadline_ = now + timeout_;
  return to_all(Msg::can_commit);
}

std::vector<Send> Coordinator::on_message(int, Msg m, Clock::time_point now) {
  if (phase_ == Phase::votes && m == Msg::no) {
    phase_ = Phase::done;
    state_ = State::aborted;
    return to_all(Msg::abort);
  }
  if (phase_ == Phase::votes && m == Msg::yes && ++answers_ == n_) {
    phase_ = Phase::acks;
    state_ = State::prepared;
    answers_ = 0;
    deadline_ = now + timeout_;
    return to_all(Msg::pre_commit);
  }
  if (phase_ == Phase::acks && m == Msg::ack && ++answers_ == n_) {
    phase_ = Phase::done;
    state_ = State::committed;
    return to_all(Msg::do_commit);
  }
  return {};
}

std::vector<Send> Coordinator::on_tick(Clock::time_point now) {
  if (now < deadline_) return {};
  if (phase_ == Phase::votes) {  // a vote missing: abort
    phase_ = Phase::done;
    state_ = State::aborted;
    return to_all(Msg::abort);
  }
  if (phase_ == Phase::acks) {  // everyone voted yes: a missing ack still commits
    phase_ = Phase::done;
    state_ = State::committed;
    return to_all(Msg::do_commit);
  }
  return {};
}

}  // namespace dlock::tx::detail::three_pc

#include "core/redlock_round.hpp"

namespace dlock::detail {

RedlockRound::RedlockRound(std::size_t nodes, milliseconds lease, time_point start)
    : votes_(nodes, Vote::pending), lease_(lease), start_(start) {}

RedlockRound::Decision RedlockRound::vote(std::size_t node, bool yes, time_point now) {
  if (node < votes_.size() && votes_[node] == Vote::pending && decision_ == Decision::pending) {
    votes_[node] = yes ? Vote::yes : Vote::no;
    (yes ? yes_ : no_) += 1;
  }
  return check(now);
}

RedlockRound::Decision RedlockRound::check(time_point now) {
  if (decision_ == Decision::pending) decision_ = decide(now);
  return decision_;
}

RedlockRound::Decision RedlockRound::decide(time_point now) {
  const std::size_t need = quorum(votes_.size());
  const auto left = std::chrono::duration_cast<milliseconds>(deadline() - now);
  if (left <= milliseconds(0)) return Decision::failed;  // too late, whatever the votes
  if (yes_ >= need) {
    validity_ = left;
    return Decision::granted;
  }
  if (votes_.size() - no_ < need) return Decision::failed;  // a majority is out of reach
  return Decision::pending;
}

std::vector<std::size_t> RedlockRound::not_yes() const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < votes_.size(); ++i)
    if (votes_[i] != Vote::yes) out.push_back(i);
  return out;
}

}  // namespace dlock::detail

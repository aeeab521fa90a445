// One Redlock round (acquire or extend) over N independent masters, as an
// I/O-free state machine.
//
// The caller sends the same request to every node at once, then feeds each
// node's outcome (or its per-node timeout) with the current steady-clock
// time. The round decides as soon as the result cannot change:
//   granted  a majority (N/2 + 1) said yes, and the validity left,
//            lease - (now - start) - drift with drift = lease/100 + 2 ms,
//            is still positive; `start` is taken before the first request;
//   failed   a majority can no longer be reached, or the validity ran out
//            before it was (a late majority does not count).
// On failure the caller releases the lock on *every* node, including those
// that failed or never answered: their grant may have happened after all.
#ifndef DLOCK_CORE_REDLOCK_ROUND_HPP_
#define DLOCK_CORE_REDLOCK_ROUND_HPP_

#include <chrono>
#include <cstddef>
#include <vector>

#include "core/validity.hpp"
#include "dlock/options.hpp"

namespace dlock::detail {

class RedlockRound {
 public:
  using Clock = std::chrono::steady_clock;
  using time_point = Clock::time_point;

  enum class Vote { pending, yes, no };
  enum class Decision { pending, granted, failed };

  // REQUIRES: nodes >= 1 (odd recommended), lease > 0.
  RedlockRound(std::size_t nodes, milliseconds lease, time_point start);

  static std::size_t quorum(std::size_t nodes) { return nodes / 2 + 1; }

  // A node's answer: yes (granted or extended), no (busy, lost, error,
  // per-node timeout). Repeated or late votes for a node are ignored.
  Decision vote(std::size_t node, bool yes, time_point now);
  // Re-evaluates without a new vote (e.g. when the validity may have run
  // out while waiting for stragglers).
  Decision check(time_point now);

  Decision decision() const { return decision_; }
  std::size_t yes_votes() const { return yes_; }
  std::size_t no_votes() const { return no_; }
  // At the decision: how long the lock stays valid (granted only).
  milliseconds validity() const { return validity_; }
  // When the round must be given up if undecided: start + lease - drift.
  time_point deadline() const { return valid_until(start_, lease_); }
  // Nodes that did not vote yes: with a failure they still need a release.
  std::vector<std::size_t> not_yes() const;

 private:
  Decision decide(time_point now);
  std::vector<Vote> votes_;
  milliseconds lease_;
  time_point start_;
  std::size_t yes_ = 0;
  std::size_t no_ = 0;
  Decision decision_ = Decision::pending;
  milliseconds validity_{0};
};

}  // namespace dlock::detail

#endif  // DLOCK_CORE_REDLOCK_ROUND_HPP_

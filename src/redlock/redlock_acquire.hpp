// Redlock's acquire over N independent masters, as an I/O-free state
// machine with an injected random source.
//
// Phases: voting -> granted: a short wait for node 0's fence (node 0 is the
// designated fence node) -> done; or voting -> failed: undoing the call on
// every node that may have applied it -> done. The round's arithmetic
// (majority, validity) is RedlockRound's.
//
// Undo rule: a failed acquire leaves nothing behind. Every node that granted,
// or whose answer is unknown, gets an undo (the idempotent release of this
// round); a node still silent is undone when its answer arrives, so the undo
// stays behind the acquire on that node's connection. The failure is
// reported once the undos are answered (silent nodes only until the
// per-node timeout).
//
// The driver sends the call to every node, arms a timer for timer_at(), and
// performs the Effects each event returns.
#ifndef DLOCK_REDLOCK_REDLOCK_ACQUIRE_HPP_
#define DLOCK_REDLOCK_REDLOCK_ACQUIRE_HPP_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend.hpp"
#include "core/redlock_round.hpp"

namespace dlock::detail {

class RedlockAcquire {
 public:
  using Clock = std::chrono::steady_clock;
  using time_point = Clock::time_point;

  // The backend's view of its masters, read at each decision; outlives the
  // machine.
  struct Nodes {
    const std::vector<std::string>* names;  // for messages
    const std::vector<bool>* connected;     // command connection up
  };
  struct Undo {
    std::size_t node;
    bool counted;  // the report waits for this undo's answer
  };
  struct Effects {
    std::vector<Undo> undo;                        // send these undos now
    std::optional<Result<AcquireOutcome>> report;  // tell the caller (once)
  };

  // rng: uniform 64-bit values (split-vote retry jitter).
  RedlockAcquire(const AcquireCall& call, time_point start, milliseconds per_node, Nodes nodes,
                 std::function<std::uint64_t()> rng);

  const AcquireCall& call() const { return call_; }
  // When to call on_timer: the per-node timeout, or the validity's end.
  time_point timer_at() const;
  bool done() const { return phase_ == Phase::done; }

  Effects on_answer(std::size_t node, const Result<AcquireOutcome>& answer, time_point now);
  Effects on_timer(time_point now);
  Effects on_undo_answer(bool counted);

  // After a split vote nobody holds a majority: competing clients retry
  // after a random delay up to this, so they fall out of step.
  static constexpr milliseconds kSplitRetryMax{50};

 private:
  enum class Vote { pending, granted, busy, lost, mismatch, error };
  enum class Phase { voting, fence_wait, undoing, done };

  Effects decide(time_point now);
  Effects grant();
  Effects deliver(Result<AcquireOutcome> r);
  Result<AcquireOutcome> failure() const;
  bool wrote_nothing(std::size_t i) const;
  milliseconds random_delay(milliseconds max) const;

  AcquireCall call_;
  RedlockRound round_;
  milliseconds per_node_;
  time_point start_;
  Nodes nodes_;
  std::function<std::uint64_t()> rng_;
  Phase phase_ = Phase::voting;
  std::vector<Vote> votes_;
  std::vector<bool> replied_;  // the node's own answer has arrived
  std::vector<AcquireOutcome> outcomes_;
  std::vector<Status> errors_;
  std::optional<Result<AcquireOutcome>> report_;  // a failure, sent once the undos are answered
  std::size_t undo_waiting_ = 0;
  bool timed_out_ = false;
};

}  // namespace dlock::detail

#endif  // DLOCK_REDLOCK_REDLOCK_ACQUIRE_HPP_

// The TCC protocol as an I/O-free state machine: given what the log and the
// participants said so far, next() names the one thing to do now (call a
// branch, log the decision, log the end, or wait), and calls() every call
// that may be made at once with it. The coordinator does the I/O and feeds
// the results back. Time is injected (steady clock).
#ifndef DLOCK_TX_TCC_MACHINE_HPP_
#define DLOCK_TX_TCC_MACHINE_HPP_

#include <chrono>
#include <string>
#include <vector>

#include "dlock/tx.hpp"

namespace dlock::tx::detail {

using Clock = std::chrono::steady_clock;

// Capped exponential backoff with jitter: the wait after the `attempts`-th
// failure (1 or more), base * 2^(attempts-1) capped at `cap`, scaled into
// [1/2, 1] by `unit` in [0, 1].
milliseconds backoff(int attempts, milliseconds base, milliseconds cap, double unit);

struct BranchProgress {
  bool tried = false;       // its Try succeeded
  bool try_failed = false;  // its Try failed definitely
  bool done = false;        // its Confirm or Cancel succeeded
  int attempts = 0;         // failed attempts of its current call
  Clock::time_point not_before{};
  std::string last_error;
};

struct Step {
  enum class Kind {
    call,    // call `op` on `branch`
    decide,  // log trying -> `to` (committing or aborting) with `reason`
    finish,  // log `to` (committed or aborted) with every branch done
    wait,    // nothing is due before `until`
    done,    // finished
  };
  Kind kind = Kind::done;
  int branch = 0;
  Op op = Op::try_;
  State to = State::trying;
  std::string reason;
  Clock::time_point until{};
};

class TccMachine {
 public:
  // A transaction in `state` with `branches` (as many as it has). `resumed`:
  // driven by recovery, not by the process that started it, so an undecided
  // one is aborted (presumed abort: its Tries cannot be resumed).
  TccMachine(State state, std::vector<BranchProgress> branches, Clock::time_point deadline, bool resumed);

  Step next(Clock::time_point now) const;
  // When next() is a call: every call due now, that one first. Phase two's
  // calls are independent (the decision is fixed), so all that are due;
  // Tries one at a time, in the branches' order, unless parallel_tries.
  std::vector<Step> calls(Clock::time_point now) const;

  // The answer of a `call` step; `unit` in [0, 1] jitters the backoff.
  // Returns the branch's failed attempts so far (0 after a success).
  int on_call(int branch, Op op, Outcome outcome, std::string error, Clock::time_point now, double unit);
  // The log accepted a decide or finish step.
  void on_logged(State to) { state_ = to; }

  void set_backoff(milliseconds base, milliseconds cap) {
    base_ = base;
    cap_ = cap;
  }
  // Every Try may be called at once (no order among them); then the first
  // definite failure aborts without waiting for the Tries still to retry.
  void set_parallel_tries(bool on) { parallel_tries_ = on; }
  State state() const { return state_; }
  // When the Try phase ends: no Try is called at or after it.
  Clock::time_point deadline() const { return deadline_; }
  const std::vector<BranchProgress>& branches() const { return branches_; }

 private:
  Step phase_two(Clock::time_point now) const;
  Step trying(Clock::time_point now) const;

  State state_;
  std::vector<BranchProgress> branches_;
  Clock::time_point deadline_;
  bool resumed_;
  bool parallel_tries_ = false;
  milliseconds base_{50};
  milliseconds cap_{30000};
};

}  // namespace dlock::tx::detail

#endif  // DLOCK_TX_TCC_MACHINE_HPP_

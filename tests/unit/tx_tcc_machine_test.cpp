// The TCC state machine with an injected clock: no log, no participants.
#include <gtest/gtest.h>

#include "tx/tcc_machine.hpp"

namespace dlock::tx::detail {
namespace {

using namespace std::chrono_literals;
using Kind = Step::Kind;

const Clock::time_point t0 = Clock::time_point() + 1h;

TccMachine fresh(std::size_t branches, Clock::time_point deadline = t0 + 10s) {
  TccMachine m(State::trying, std::vector<BranchProgress>(branches), deadline, false);
  m.set_backoff(100ms, 1s);
  return m;
}

TEST(TccMachine, AllTriesSucceedThenConfirmsEachThenCommits) {
  auto m = fresh(2);
  for (int b : {0, 1}) {
    const Step s = m.next(t0);
    ASSERT_EQ(s.kind, Kind::call);
    EXPECT_EQ(s.branch, b);
    EXPECT_EQ(s.op, Op::try_);
    m.on_call(b, Op::try_, Outcome::success, {}, t0, 0.5);
  }
  Step s = m.next(t0);
  ASSERT_EQ(s.kind, Kind::decide) << "the decision is logged before any Confirm";
  EXPECT_EQ(s.to, State::committing);
  m.on_logged(State::committing);
  for (int b : {0, 1}) {
    s = m.next(t0);
    ASSERT_EQ(s.kind, Kind::call);
    EXPECT_EQ(s.op, Op::confirm);
    EXPECT_EQ(s.branch, b);
    m.on_call(b, Op::confirm, Outcome::success, {}, t0, 0.5);
  }
  s = m.next(t0);
  ASSERT_EQ(s.kind, Kind::finish);
  EXPECT_EQ(s.to, State::committed);
  m.on_logged(State::committed);
  EXPECT_EQ(m.next(t0).kind, Kind::done);
}

TEST(TccMachine, AFailedTryAbortsAndCancelsEveryBranchEvenUntriedOnes) {
  auto m = fresh(3);
  m.on_call(0, Op::try_, Outcome::success, {}, t0, 0.5);
  m.on_call(1, Op::try_, Outcome::failure, "no stock", t0, 0.5);
  Step s = m.next(t0);
  ASSERT_EQ(s.kind, Kind::decide);
  EXPECT_EQ(s.to, State::aborting);
  EXPECT_NE(s.reason.find("branch 1 Try failed: no stock"), std::string::npos) << s.reason;
  m.on_logged(State::aborting);
  for (int b : {0, 1, 2}) {
    s = m.next(t0);
    ASSERT_EQ(s.kind, Kind::call);
    EXPECT_EQ(s.op, Op::cancel);
    EXPECT_EQ(s.branch, b) << "an untried branch gets an (empty) Cancel too: its Try may still be on the wire";
    m.on_call(b, Op::cancel, Outcome::success, {}, t0, 0.5);
  }
  s = m.next(t0);
  ASSERT_EQ(s.kind, Kind::finish);
  EXPECT_EQ(s.to, State::aborted);
}

TEST(TccMachine, AnUnansweredTryIsAskedAgainAfterBackoffUntilTheDeadlineAborts) {
  auto m = fresh(1, t0 + 1s);
  EXPECT_EQ(m.on_call(0, Op::try_, Outcome::unknown, "timeout", t0, 1.0), 1);
  Step s = m.next(t0);
  ASSERT_EQ(s.kind, Kind::wait);
  EXPECT_EQ(s.until, t0 + 100ms);
  s = m.next(t0 + 100ms);
  ASSERT_EQ(s.kind, Kind::call);
  EXPECT_EQ(s.op, Op::try_);
  m.on_call(0, Op::try_, Outcome::ongoing, {}, t0 + 100ms, 1.0);
  EXPECT_EQ(m.next(t0 + 150ms).until, t0 + 300ms) << "doubled";
  s = m.next(t0 + 1s);
  ASSERT_EQ(s.kind, Kind::decide) << "a timeout before the decision can only abort";
  EXPECT_EQ(s.to, State::aborting);
  EXPECT_NE(s.reason.find("deadline"), std::string::npos);
}

TEST(TccMachine, AWaitNeverRunsPastTheTryDeadline) {
  auto m = fresh(1, t0 + 150ms);
  m.on_call(0, Op::try_, Outcome::unknown, {}, t0, 1.0);
  m.on_call(0, Op::try_, Outcome::unknown, {}, t0, 1.0);  // next try at t0 + 200 ms
  const Step s = m.next(t0);
  ASSERT_EQ(s.kind, Kind::wait);
  EXPECT_EQ(s.until, t0 + 150ms);
}

TEST(TccMachine, RecoveryAbortsAnUndecidedTransaction) {
  std::vector<BranchProgress> p(2);
  p[0].tried = true;
  TccMachine m(State::trying, p, t0 + 1h, true);
  const Step s = m.next(t0);
  ASSERT_EQ(s.kind, Kind::decide);
  EXPECT_EQ(s.to, State::aborting) << "presumed abort";
}

TEST(TccMachine, RecoveryResumesADecidedTransactionWhereItWas) {
  std::vector<BranchProgress> p(3);
  p[1].done = true;
  TccMachine m(State::committing, p, t0, true);
  m.set_backoff(100ms, 1s);
  Step s = m.next(t0);
  ASSERT_EQ(s.kind, Kind::call);
  EXPECT_EQ(s.branch, 0);
  EXPECT_EQ(s.op, Op::confirm) << "a decided commit is never turned into an abort";
  m.on_call(0, Op::confirm, Outcome::success, {}, t0, 0.5);
  s = m.next(t0);
  EXPECT_EQ(s.branch, 2) << "branch 1 was confirmed before the crash";
}

TEST(TccMachine, AFailingConfirmIsRetriedWithoutHoldingUpTheOthers) {
  std::vector<BranchProgress> p(2);
  TccMachine m(State::committing, p, t0, false);
  m.set_backoff(100ms, 1s);
  EXPECT_EQ(m.on_call(0, Op::confirm, Outcome::failure, "refused", t0, 1.0), 1);
  EXPECT_NE(m.branches()[0].last_error.find("contract violation"), std::string::npos) << m.branches()[0].last_error;
  Step s = m.next(t0);
  ASSERT_EQ(s.kind, Kind::call);
  EXPECT_EQ(s.branch, 1);
  m.on_call(1, Op::confirm, Outcome::success, {}, t0, 1.0);
  s = m.next(t0);
  ASSERT_EQ(s.kind, Kind::wait);
  EXPECT_EQ(s.until, t0 + 100ms);
  for (int i = 2; i <= 6; ++i) EXPECT_EQ(m.on_call(0, Op::confirm, Outcome::failure, {}, t0, 1.0), i);
  EXPECT_EQ(m.next(t0).until, t0 + 1s) << "capped";
  EXPECT_EQ(m.state(), State::committing) << "a definite failure after the decision never changes it";
}

TEST(TccMachine, InOrderOnlyTheFirstUntriedTryIsCalledAndPhaseTwoCallsEveryDueBranch) {
  auto m = fresh(3);
  auto tries = m.calls(t0);
  ASSERT_EQ(tries.size(), 1u) << "Tries in order: one at a time";
  EXPECT_EQ(tries[0].branch, 0);
  for (int b : {0, 1, 2}) m.on_call(b, Op::try_, Outcome::success, {}, t0, 0.5);
  EXPECT_TRUE(m.calls(t0).empty()) << "the decision comes before any Confirm";
  m.on_logged(State::committing);
  m.on_call(1, Op::confirm, Outcome::unknown, "timeout", t0, 1.0);  // branch 1 backs off 100 ms
  auto confirms = m.calls(t0 + 1ms);
  ASSERT_EQ(confirms.size(), 2u);
  EXPECT_EQ(confirms[0].branch, 0);
  EXPECT_EQ(confirms[1].branch, 2) << "a branch in its backoff is not called with the others";
  for (const auto& c : confirms) EXPECT_EQ(c.op, Op::confirm);
  EXPECT_EQ(m.calls(t0 + 200ms).size(), 3u);
}

TEST(TccMachine, ParallelTriesAreCalledTogetherAndAFailureAbortsWithoutWaitingForRetries) {
  auto m = fresh(3);
  m.set_parallel_tries(true);
  auto tries = m.calls(t0);
  ASSERT_EQ(tries.size(), 3u);
  for (int b : {0, 1, 2}) {
    EXPECT_EQ(tries[static_cast<std::size_t>(b)].branch, b);
    EXPECT_EQ(tries[static_cast<std::size_t>(b)].op, Op::try_);
  }
  m.on_call(0, Op::try_, Outcome::unknown, "timeout", t0, 1.0);  // asked again after 100 ms
  m.on_call(1, Op::try_, Outcome::success, {}, t0, 0.5);
  m.on_call(2, Op::try_, Outcome::success, {}, t0, 0.5);
  Step s = m.next(t0 + 1ms);
  ASSERT_EQ(s.kind, Kind::wait) << "only branch 0 is left, in its backoff";
  EXPECT_EQ(s.until, t0 + 100ms);
  tries = m.calls(t0 + 100ms);
  ASSERT_EQ(tries.size(), 1u);
  EXPECT_EQ(tries[0].branch, 0);
  m.on_call(0, Op::try_, Outcome::failure, "no stock", t0 + 100ms, 0.5);
  s = m.next(t0 + 100ms);
  ASSERT_EQ(s.kind, Kind::decide);
  EXPECT_EQ(s.to, State::aborting);
  m.on_logged(State::aborting);
  EXPECT_EQ(m.calls(t0 + 100ms).size(), 3u) << "every branch is cancelled, at once";
}

TEST(TccMachine, ParallelTriesWaitForTheSoonestBackoffNotTheFirstBranchs) {
  auto m = fresh(2);
  m.set_parallel_tries(true);
  m.on_call(0, Op::try_, Outcome::unknown, "timeout", t0, 1.0);  // 100 ms
  m.on_call(0, Op::try_, Outcome::unknown, "timeout", t0, 1.0);  // 200 ms
  m.on_call(1, Op::try_, Outcome::unknown, "timeout", t0, 1.0);  // 100 ms
  const Step s = m.next(t0);
  ASSERT_EQ(s.kind, Kind::wait);
  EXPECT_EQ(s.until, t0 + 100ms);
  const auto due = m.calls(t0 + 100ms);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].branch, 1);
}

TEST(TccBackoff, DoublesCapsAndJittersIntoTheUpperHalf) {
  EXPECT_EQ(backoff(0, 50ms, 30s, 1.0), 0ms);
  EXPECT_EQ(backoff(1, 50ms, 30s, 1.0), 50ms);
  EXPECT_EQ(backoff(1, 50ms, 30s, 0.0), 25ms);
  EXPECT_EQ(backoff(4, 50ms, 30s, 1.0), 400ms);
  EXPECT_EQ(backoff(40, 50ms, 30s, 1.0), 30s);
  EXPECT_EQ(backoff(1000000, 50ms, 30s, 0.0), 15s) << "no overflow";
  EXPECT_EQ(backoff(3, 50ms, 30s, 7.0), 200ms) << "unit clamped";
}

}  // namespace
}  // namespace dlock::tx::detail

// The acquire algorithm, driven by hand with a fake steady clock.
#include "core/acquire_fsm.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace dlock::detail {
namespace {

using Kind = AcquireFsm::Action::Kind;
using namespace std::chrono_literals;

struct FakeClock {
  AcquireFsm::time_point now{std::chrono::seconds(1000)};
  void advance(milliseconds d) { now += d; }
};

TEST(AcquireFsm, FreeLockIsOneAttempt) {
  FakeClock c;
  AcquireFsm fsm(c.now, kForever, 2s);
  EXPECT_EQ(fsm.start().kind, Kind::attempt);
  auto a = fsm.on_granted(c.now, c.now, 30000ms, true);
  EXPECT_EQ(a.kind, Kind::done);
  EXPECT_TRUE(a.status.ok());
}

TEST(AcquireFsm, TryOnceReportsBusyWithoutSubscribing) {
  FakeClock c;
  AcquireFsm fsm(c.now, 0ms, 2s);
  fsm.start();
  auto a = fsm.on_busy(c.now, WaitHint::expiry(5000ms));
  EXPECT_EQ(a.kind, Kind::done);
  EXPECT_EQ(a.status.code(), Errc::busy);
  EXPECT_FALSE(fsm.watching());
}

TEST(AcquireFsm, SubscribesBeforeRetryingThenSleepsForAtMostTheHolderTtl) {
  FakeClock c;
  AcquireFsm fsm(c.now, 10s, 2s);
  fsm.start();
  EXPECT_EQ(fsm.on_busy(c.now, WaitHint::expiry(3000ms)).kind, Kind::watch);
  // Subscription confirmed: attempt again (a release in between is not missed).
  EXPECT_EQ(fsm.on_watch_ready(c.now).kind, Kind::attempt);
  auto w = fsm.on_busy(c.now, WaitHint::expiry(3000ms));
  ASSERT_EQ(w.kind, Kind::wait);
  EXPECT_EQ(w.until, c.now + 3001ms);  // a crashed holder costs at most its TTL
  // The release message wakes it early.
  c.advance(40ms);
  EXPECT_EQ(fsm.on_wake(c.now).kind, Kind::attempt);
  EXPECT_EQ(fsm.on_granted(c.now, c.now, 30000ms, true).kind, Kind::done);
}

TEST(AcquireFsm, WaitIsCappedByTheWaitTimeoutThenTimesOut) {
  FakeClock c;
  AcquireFsm fsm(c.now, 500ms, 2s);
  fsm.start();
  fsm.on_busy(c.now, WaitHint::expiry(30000ms));
  fsm.on_watch_ready(c.now);
  auto w = fsm.on_busy(c.now, WaitHint::expiry(30000ms));
  ASSERT_EQ(w.kind, Kind::wait);
  EXPECT_EQ(w.until, c.now + 500ms);
  c.advance(500ms);
  auto d = fsm.on_wake(c.now);
  EXPECT_EQ(d.kind, Kind::done);
  EXPECT_EQ(d.status.code(), Errc::timeout);
}

TEST(AcquireFsm, StrayWakeWhileAttemptingIsIgnored) {
  FakeClock c;
  AcquireFsm fsm(c.now, 10s, 2s);
  fsm.start();
  EXPECT_EQ(fsm.on_wake(c.now).kind, Kind::none);
}

TEST(AcquireFsm, HolderWithoutExpiryIsRecheckedPeriodically) {
  FakeClock c;
  AcquireFsm fsm(c.now, kForever, 2s);
  fsm.start();
  fsm.on_busy(c.now, WaitHint::event());
  fsm.on_watch_ready(c.now);
  auto w = fsm.on_busy(c.now, WaitHint::event());
  ASSERT_EQ(w.kind, Kind::wait);
  EXPECT_EQ(w.until, c.now + 1000ms);
}

TEST(AcquireFsm, TransientErrorsRetryWithBackoffWithinBudget) {
  FakeClock c;
  AcquireFsm fsm(c.now, 10s, 200ms);
  fsm.start();
  Status down(Errc::unavailable, "down");
  auto w1 = fsm.on_error(c.now, down);
  ASSERT_EQ(w1.kind, Kind::wait);
  EXPECT_EQ(w1.until, c.now + 10ms);
  c.advance(10ms);
  EXPECT_EQ(fsm.on_wake(c.now).kind, Kind::attempt);
  auto w2 = fsm.on_error(c.now, down);
  EXPECT_EQ(w2.until, c.now + 20ms);  // doubled
  c.advance(200ms);
  auto d = fsm.on_error(c.now, down);
  EXPECT_EQ(d.kind, Kind::done);
  EXPECT_EQ(d.status.code(), Errc::unavailable);
  EXPECT_FALSE(fsm.in_doubt());
}

TEST(AcquireFsm, UnknownOutcomeStaysInDoubtUntilAReplySettlesIt) {
  FakeClock c;
  AcquireFsm fsm(c.now, 0ms, 500ms, 500ms);  // even a try-once settles its doubt, within its reply budget
  fsm.start();
  auto w = fsm.on_error(c.now, Status(Errc::outcome_unknown, "reply lost"));
  ASSERT_EQ(w.kind, Kind::wait);
  EXPECT_TRUE(fsm.in_doubt());
  c.advance(10ms);
  EXPECT_EQ(fsm.on_wake(c.now).kind, Kind::attempt);
  // The replayed script answers: granted (it had been applied) -> settled.
  EXPECT_TRUE(fsm.on_granted(c.now, c.now, 30000ms, true).status.ok());
  EXPECT_FALSE(fsm.in_doubt());
}

TEST(AcquireFsm, UnknownOutcomeThatNeverSettlesIsReportedUnknown) {
  FakeClock c;
  AcquireFsm fsm(c.now, 0ms, 100ms, 1000ms);
  fsm.start();
  Status lost(Errc::outcome_unknown, "reply lost");
  fsm.on_error(c.now, lost);
  c.advance(50ms);
  fsm.on_wake(c.now);
  fsm.on_error(c.now, Status(Errc::unavailable, "down"));
  c.advance(60ms);
  fsm.on_wake(c.now);
  auto d = fsm.on_error(c.now, Status(Errc::unavailable, "down"));
  ASSERT_EQ(d.kind, Kind::done);
  EXPECT_EQ(d.status.code(), Errc::outcome_unknown) << "never report an unknown outcome as a clean failure";
  EXPECT_TRUE(fsm.in_doubt());
}

// The call ends by its deadline even in doubt: timeout, and the caller
// undoes the attempt (in_doubt).
TEST(AcquireFsm, AnAttemptInDoubtAtTheDeadlineEndsTheCallWithTimeout) {
  FakeClock c;
  AcquireFsm fsm(c.now, 100ms, 2000ms);
  fsm.start();
  ASSERT_EQ(fsm.answer_by(), c.now + 100ms);
  fsm.on_error(c.now, Status(Errc::outcome_unknown, "reply lost"));
  c.advance(100ms);
  auto d = fsm.on_wake(c.now);
  ASSERT_EQ(d.kind, Kind::done);
  EXPECT_EQ(d.status.code(), Errc::timeout);
  EXPECT_TRUE(fsm.in_doubt());
  // No answer at all: the same at answer_by.
  AcquireFsm silent(c.now, 100ms, 2000ms);
  silent.start();
  c.advance(100ms);
  auto s = silent.on_no_answer(c.now);
  ASSERT_EQ(s.kind, Kind::done);
  EXPECT_EQ(s.status.code(), Errc::timeout);
  EXPECT_TRUE(silent.in_doubt());
}

TEST(AcquireFsm, PermanentErrorsEndAtOnce) {
  FakeClock c;
  AcquireFsm fsm(c.now, kForever, 2s);
  fsm.start();
  auto d = fsm.on_error(c.now, Status(Errc::wrong_type, "WRONGTYPE"));
  EXPECT_EQ(d.kind, Kind::done);
  EXPECT_EQ(d.status.code(), Errc::wrong_type);
}

TEST(AcquireFsm, LostReentryIsNotReacquired) {
  FakeClock c;
  AcquireFsm fsm(c.now, kForever, 2s);
  fsm.start();
  auto d = fsm.on_lost();
  EXPECT_EQ(d.status.code(), Errc::lease_lost);
}

// A subscription that never confirms (refused, no connection) must not
// suspend the wait's deadline.
TEST(AcquireFsm, TheDeadlineHoldsWhileTheSubscriptionIsPending) {
  FakeClock c;
  AcquireFsm fsm(c.now, 500ms, 2s);
  fsm.start();
  auto w = fsm.on_busy(c.now, WaitHint::expiry(30000ms));
  ASSERT_EQ(w.kind, Kind::watch);
  EXPECT_EQ(w.until, c.now + 500ms) << "the caller arms its deadline timer";
  c.advance(100ms);
  EXPECT_EQ(fsm.on_wake(c.now).kind, Kind::none) << "a release before the subscription is ready";
  c.advance(400ms);
  auto d = fsm.on_wake(c.now);
  ASSERT_EQ(d.kind, Kind::done);
  EXPECT_EQ(d.status.code(), Errc::timeout);
  EXPECT_EQ(fsm.on_watch_ready(c.now).kind, Kind::none) << "a late confirmation changes nothing";
}

// Without release notifications a waiter polls, from 10 ms doubling to
// 500 ms, never longer than the holder's remaining lease.
TEST(AcquireFsm, WithoutNotificationsAWaiterPollsWithBackoff) {
  FakeClock c;
  AcquireFsm fsm(c.now, kForever, 2s);
  fsm.start();
  fsm.on_busy(c.now, WaitHint::expiry(30000ms));
  EXPECT_EQ(fsm.on_watch_ready(c.now, /*subscribed=*/false).kind, Kind::attempt);
  std::vector<milliseconds> naps;
  for (int i = 0; i < 8; ++i) {
    auto w = fsm.on_busy(c.now, WaitHint::expiry(30000ms));
    ASSERT_EQ(w.kind, Kind::wait);
    naps.push_back(std::chrono::duration_cast<milliseconds>(w.until - c.now));
    c.now = w.until;
    ASSERT_EQ(fsm.on_wake(c.now).kind, Kind::attempt);
  }
  EXPECT_EQ(naps.front(), 10ms);
  EXPECT_EQ(naps[1], 20ms);
  EXPECT_EQ(naps.back(), 500ms);
  auto w = fsm.on_busy(c.now, WaitHint::expiry(3ms));
  EXPECT_EQ(w.until, c.now + 4ms) << "capped by the holder's remaining lease";
}

// Waits too long for the clock count as forever instead of overflowing.
TEST(AcquireFsm, HugeWaitsAreForever) {
  FakeClock c;
  AcquireFsm fsm(c.now, milliseconds(std::chrono::duration_cast<milliseconds>(std::chrono::hours(24 * 365 * 300))), 2s);
  fsm.start();
  fsm.on_busy(c.now, WaitHint::expiry(1000ms));
  fsm.on_watch_ready(c.now);
  auto w = fsm.on_busy(c.now, WaitHint::expiry(1000ms));
  ASSERT_EQ(w.kind, Kind::wait) << "not timed out at once";
  EXPECT_EQ(to_wait(std::chrono::seconds::max()), kForever);
  EXPECT_EQ(to_wait(std::chrono::nanoseconds(1)), 1ms);
  EXPECT_EQ(to_wait(-5s), 0ms);
}

// Decisions that lived in I/O callbacks before: late grants and releases
// published while an attempt is in flight.

TEST(AcquireFsm, AGrantWhoseReplyCameAfterItsValidityIsUndoneAndRetried) {
  FakeClock c;
  AcquireFsm fsm(c.now, 5s, 2s);
  ASSERT_EQ(fsm.start().kind, Kind::attempt);
  const auto sent = c.now;
  c.advance(100ms);  // lease 100 ms: valid until sent + 100 - 3
  auto a = fsm.on_granted(c.now, sent, 100ms, true);
  EXPECT_TRUE(a.undo);
  EXPECT_EQ(a.kind, Kind::wait);  // backoff, then another attempt
  EXPECT_EQ(fsm.late_grants(), 1u);
  c.now = a.until;
  EXPECT_EQ(fsm.on_wake(c.now).kind, Kind::attempt);
  auto b = fsm.on_granted(c.now, c.now, 100ms, true);
  EXPECT_FALSE(b.undo);
  EXPECT_EQ(b.kind, Kind::done);
  EXPECT_TRUE(b.status.ok());
}

TEST(AcquireFsm, AGrantJustInsideItsValidityStands) {
  FakeClock c;
  AcquireFsm fsm(c.now, 5s, 2s);
  (void)fsm.start();
  const auto sent = c.now;
  c.advance(96ms);  // valid until sent + 97 ms
  auto a = fsm.on_granted(c.now, sent, 100ms, true);
  EXPECT_FALSE(a.undo);
  EXPECT_TRUE(a.status.ok());
}

TEST(AcquireFsm, ALateReentryIsNotUndone) {
  FakeClock c;
  AcquireFsm fsm(c.now, 5s, 2s);
  (void)fsm.start();
  const auto sent = c.now;
  c.advance(1s);  // the hold was valid already; a re-entry cannot be late
  auto a = fsm.on_granted(c.now, sent, 100ms, false);
  EXPECT_FALSE(a.undo);
  EXPECT_TRUE(a.status.ok());
}

TEST(AcquireFsm, ALateGrantPastTheWaitEndsAsUnavailable) {
  FakeClock c;
  AcquireFsm fsm(c.now, 50ms, 0ms);  // no retry budget
  (void)fsm.start();
  const auto sent = c.now;
  c.advance(200ms);
  auto a = fsm.on_granted(c.now, sent, 100ms, true);
  EXPECT_TRUE(a.undo);
  EXPECT_EQ(a.kind, Kind::done);
  EXPECT_EQ(a.status.code(), Errc::unavailable);
}

TEST(AcquireFsm, AReleaseDuringAnAttemptMakesItsBusyAnswerRetryAtOnce) {
  FakeClock c;
  AcquireFsm fsm(c.now, kForever, 2s);
  (void)fsm.start();
  ASSERT_EQ(fsm.on_busy(c.now, WaitHint::expiry(30000ms)).kind, Kind::watch);
  ASSERT_EQ(fsm.on_watch_ready(c.now).kind, Kind::attempt);
  EXPECT_TRUE(fsm.attempting());
  // The release is published while the attempt is out: nothing to do now...
  EXPECT_EQ(fsm.on_wake(c.now).kind, Kind::none);
  // ...but the busy answer may predate it: try again instead of sleeping 30 s.
  EXPECT_EQ(fsm.on_busy(c.now, WaitHint::expiry(30000ms)).kind, Kind::attempt);
  // Without a release meanwhile, the next busy answer sleeps.
  auto w = fsm.on_busy(c.now, WaitHint::expiry(30000ms));
  EXPECT_EQ(w.kind, Kind::wait);
  EXPECT_EQ(w.until, c.now + 30001ms);
}

// A queue backend's busy answer set its own watches as it read the line
// (WaitHint::watched): once subscribed, the waiter sleeps until woken; an
// attempt then would only read the line again.
TEST(AcquireFsm, AWatchedBusyAnswerIsWaitedOnWithoutAnotherAttempt) {
  FakeClock c;
  AcquireFsm fsm(c.now, 10s, 2s);
  (void)fsm.start();
  ASSERT_EQ(fsm.on_busy(c.now, WaitHint::watched()).kind, Kind::watch);
  auto w = fsm.on_watch_ready(c.now);
  ASSERT_EQ(w.kind, Kind::wait);
  EXPECT_EQ(w.until, c.now + 10s) << "no poll: the wait's deadline";
  EXPECT_FALSE(fsm.attempting());
  c.advance(5ms);
  EXPECT_EQ(fsm.on_wake(c.now).kind, Kind::attempt);
  EXPECT_EQ(fsm.on_granted(c.now, c.now, 30000ms, true).kind, Kind::done);
}

// A release published before the subscription is confirmed is not lost: the
// confirmation then attempts at once.
TEST(AcquireFsm, AReleaseWhileAWatchedSubscriptionIsPendingAttemptsAtOnce) {
  FakeClock c;
  AcquireFsm fsm(c.now, 10s, 2s);
  (void)fsm.start();
  ASSERT_EQ(fsm.on_busy(c.now, WaitHint::watched()).kind, Kind::watch);
  EXPECT_EQ(fsm.on_wake(c.now).kind, Kind::none);
  EXPECT_EQ(fsm.on_watch_ready(c.now).kind, Kind::attempt);
}

// ...nor is one published while the attempt that answered busy was out.
TEST(AcquireFsm, AReleaseDuringTheWatchedAttemptAttemptsOnceSubscribed) {
  FakeClock c;
  AcquireFsm fsm(c.now, 10s, 2s);
  (void)fsm.start();
  EXPECT_EQ(fsm.on_wake(c.now).kind, Kind::none);  // the attempt is out
  ASSERT_EQ(fsm.on_busy(c.now, WaitHint::watched()).kind, Kind::watch);
  EXPECT_EQ(fsm.on_watch_ready(c.now).kind, Kind::attempt);
  // Remembered once: the next busy answer waits.
  EXPECT_EQ(fsm.on_busy(c.now, WaitHint::watched()).kind, Kind::wait);
}

// Refused (no notifications): it polls, as after any other busy answer.
TEST(AcquireFsm, AWatchedBusyAnswerWithoutASubscriptionAttemptsAgain) {
  FakeClock c;
  AcquireFsm fsm(c.now, 10s, 2s);
  (void)fsm.start();
  ASSERT_EQ(fsm.on_busy(c.now, WaitHint::watched()).kind, Kind::watch);
  EXPECT_EQ(fsm.on_watch_ready(c.now, /*subscribed=*/false).kind, Kind::attempt);
}

TEST(AcquireFsm, HintKindsSetTheNap) {
  FakeClock c;
  AcquireFsm fsm(c.now, kForever, 2s);
  (void)fsm.start();
  (void)fsm.on_busy(c.now, WaitHint::expiry(10ms));
  (void)fsm.on_watch_ready(c.now);
  EXPECT_EQ(fsm.on_busy(c.now, WaitHint::retry(7ms)).until, c.now + 7ms);
  (void)fsm.on_wake(c.now + 7ms);
  // No expiry (a session holds it): a wake-up is expected, with a 1 s backstop.
  EXPECT_EQ(fsm.on_busy(c.now, WaitHint::event()).until, c.now + 1000ms);
  (void)fsm.on_wake(c.now + 1000ms);
  EXPECT_EQ(fsm.on_busy(c.now, WaitHint::expiry(40ms)).until, c.now + 41ms);
}

// A shared layout's busy answer (a peer library releases without a word):
// polls from 2 ms doubling to 64 ms, each nap in the upper half of its
// step, never past the holder's expiry; a published release still wakes it.
TEST(AcquireFsm, APeersHoldIsPolledWithBackoffAndJitter) {
  FakeClock c;
  AcquireFsm fsm(c.now, kForever, 2s);
  (void)fsm.start();
  EXPECT_EQ(fsm.on_busy(c.now, WaitHint::poll(30000ms)).kind, Kind::watch);
  EXPECT_EQ(fsm.on_watch_ready(c.now).kind, Kind::attempt);
  std::vector<milliseconds> naps;
  for (int i = 0; i < 10; ++i) {
    auto w = fsm.on_busy(c.now, WaitHint::poll(30000ms));
    ASSERT_EQ(w.kind, Kind::wait);
    naps.push_back(std::chrono::duration_cast<milliseconds>(w.until - c.now));
    c.now = w.until;
    ASSERT_EQ(fsm.on_wake(c.now).kind, Kind::attempt);
  }
  milliseconds step = 2ms;
  for (milliseconds nap : naps) {
    EXPECT_GE(nap, step / 2);
    EXPECT_LE(nap, step);
    step = std::min(step * 2, 64ms);
  }
  EXPECT_LE(fsm.on_busy(c.now, WaitHint::poll(3ms)).until, c.now + 4ms) << "never past the holder's expiry";
  (void)fsm.on_wake(c.now);
  EXPECT_LE(fsm.on_busy(c.now, WaitHint::poll(-1ms)).until, c.now + 64ms) << "a key without expiry: polled";
}

TEST(AcquireFsm, PollingWaitersDrawDifferentNaps) {
  std::vector<milliseconds> last;
  for (int k = 0; k < 8; ++k) {
    FakeClock c;
    c.advance(milliseconds(k * 7919));
    AcquireFsm fsm(c.now, kForever, 2s);
    (void)fsm.start();
    (void)fsm.on_busy(c.now, WaitHint::poll(30000ms));
    (void)fsm.on_watch_ready(c.now);
    AcquireFsm::Action w;
    for (int i = 0; i < 8; ++i) {
      w = fsm.on_busy(c.now, WaitHint::poll(30000ms));
      c.now = w.until;
      (void)fsm.on_wake(c.now);
    }
    last.push_back(std::chrono::duration_cast<milliseconds>(fsm.on_busy(c.now, WaitHint::poll(30000ms)).until - c.now));
  }
  std::sort(last.begin(), last.end());
  EXPECT_LT(last.front(), last.back()) << "eight waiters, one nap: no jitter";
}

}  // namespace
}  // namespace dlock::detail

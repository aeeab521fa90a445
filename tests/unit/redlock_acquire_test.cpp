// Redlock's acquire phases and the quorum aggregator, driven by hand: no
// servers, a fake clock, a fixed random source.
#include "redlock/redlock_acquire.hpp"

#include <gtest/gtest.h>

#include "core/quorum.hpp"

namespace dlock::detail {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Masters {
  std::vector<std::string> names{"n0", "n1", "n2", "n3", "n4"};
  std::vector<bool> connected = std::vector<bool>(5, true);
  Clock::time_point t0{std::chrono::seconds(100)};
  AcquireCall call;
  Masters() {
    call.name = "x";
    call.owner = "me";
    call.lease = 10000ms;
    call.grant = 7;
  }
  RedlockAcquire make() {
    return RedlockAcquire(call, t0, 100ms, {&names, &connected}, [] { return 41ull; });
  }
};

Result<AcquireOutcome> granted(std::uint64_t fence, unsigned depth = 1) {
  AcquireOutcome o;
  o.kind = AcquireOutcome::Kind::granted;
  o.fence = fence;
  o.depth = depth;
  return o;
}
Result<AcquireOutcome> busy(milliseconds ttl) {
  AcquireOutcome o;
  o.kind = AcquireOutcome::Kind::busy;
  o.hint = WaitHint::expiry(ttl);
  return o;
}
Result<AcquireOutcome> lost() {
  AcquireOutcome o;
  o.kind = AcquireOutcome::Kind::lost;
  return o;
}

TEST(RedlockAcquire, AMajorityWithNodeZeroGrantsWithItsFence) {
  Masters s;
  auto m = s.make();
  EXPECT_FALSE(m.on_answer(0, granted(50), s.t0 + 1ms).report);
  EXPECT_FALSE(m.on_answer(1, granted(9), s.t0 + 1ms).report);
  auto e = m.on_answer(2, granted(3), s.t0 + 2ms);
  ASSERT_TRUE(e.report);
  ASSERT_TRUE(e.report->ok());
  EXPECT_EQ((*e.report)->fence, 50u) << "node 0 is the fence node";
  EXPECT_TRUE(e.undo.empty());
  EXPECT_TRUE(m.done());
  // Stragglers after a grant change nothing.
  EXPECT_FALSE(m.on_answer(3, granted(1), s.t0 + 3ms).report);
  EXPECT_TRUE(m.on_answer(3, granted(1), s.t0 + 3ms).undo.empty());
}

TEST(RedlockAcquire, AMajorityWaitsForAConnectedNodeZeroUntilTheTimer) {
  Masters s;
  auto m = s.make();
  for (std::size_t i = 1; i <= 3; ++i) EXPECT_FALSE(m.on_answer(i, granted(9), s.t0 + 1ms).report);
  auto e = m.on_timer(m.timer_at());
  ASSERT_TRUE(e.report && e.report->ok());
  EXPECT_EQ((*e.report)->fence, 0u) << "no fence without node 0";

  Masters s2;
  auto m2 = s2.make();
  for (std::size_t i = 1; i <= 3; ++i) (void)m2.on_answer(i, granted(9), s2.t0 + 1ms);
  auto e2 = m2.on_answer(0, granted(77), s2.t0 + 2ms);
  ASSERT_TRUE(e2.report && e2.report->ok());
  EXPECT_EQ((*e2.report)->fence, 77u);

  Masters s3;
  s3.connected[0] = false;  // node 0 down: no point waiting for it
  auto m3 = s3.make();
  (void)m3.on_answer(1, granted(9), s3.t0);
  (void)m3.on_answer(2, granted(9), s3.t0);
  auto e3 = m3.on_answer(3, granted(9), s3.t0);
  ASSERT_TRUE(e3.report && e3.report->ok());
}

TEST(RedlockAcquire, ASplitVoteIsUndoneWhereGrantedAndRetriedAfterAJitteredDelay) {
  Masters s;
  auto m = s.make();
  (void)m.on_answer(0, granted(1), s.t0);
  (void)m.on_answer(1, granted(1), s.t0);
  (void)m.on_answer(2, busy(30000ms), s.t0);
  (void)m.on_answer(3, busy(30000ms), s.t0);
  auto e = m.on_answer(4, busy(30000ms), s.t0);
  EXPECT_FALSE(e.report) << "reported once the undos are answered";
  ASSERT_EQ(e.undo.size(), 2u);
  EXPECT_EQ(e.undo[0].node, 0u);
  EXPECT_EQ(e.undo[1].node, 1u);
  EXPECT_FALSE(m.on_undo_answer(true).report);
  auto done = m.on_undo_answer(true);
  ASSERT_TRUE(done.report && done.report->ok());
  EXPECT_EQ((*done.report)->kind, AcquireOutcome::Kind::busy);
  // Three said busy with 30 s left: that is a majority holding it.
  EXPECT_EQ((*done.report)->hint.kind, WaitHint::Kind::expiry);
}

TEST(RedlockAcquire, NoMajorityEitherWayRetriesSoonWithTheInjectedJitter) {
  Masters s;
  auto m = s.make();
  (void)m.on_answer(0, granted(1), s.t0);
  (void)m.on_answer(1, granted(1), s.t0);
  (void)m.on_answer(2, busy(30000ms), s.t0);
  (void)m.on_answer(3, busy(30000ms), s.t0);
  auto e = m.on_answer(4, Status(Errc::unavailable, "down"), s.t0);
  ASSERT_EQ(e.undo.size(), 3u) << "the granted ones, and the one whose error may hide a grant";
  (void)m.on_undo_answer(true);
  (void)m.on_undo_answer(true);
  auto done = m.on_undo_answer(true);
  ASSERT_TRUE(done.report && done.report->ok());
  EXPECT_EQ((*done.report)->hint.kind, WaitHint::Kind::retry);
  EXPECT_EQ((*done.report)->hint.after, 42ms) << "1 + 41 % 50 with the fixed random source";
}

TEST(RedlockAcquire, SilentNodesAreUnknownAtTheTimerAndUndoneWhenTheyAnswer) {
  Masters s;
  auto m = s.make();
  (void)m.on_answer(0, granted(1), s.t0);
  (void)m.on_answer(1, granted(1), s.t0);
  s.connected[4] = false;
  auto e = m.on_timer(m.timer_at());
  ASSERT_EQ(e.undo.size(), 2u);
  EXPECT_FALSE(e.report);
  (void)m.on_undo_answer(true);
  auto done = m.on_undo_answer(true);
  ASSERT_TRUE(done.report);
  EXPECT_EQ(done.report->code(), Errc::outcome_unknown) << done.report->status().to_string();
  EXPECT_NE(done.report->status().message().find("n4 is not connected"), std::string::npos);
  // A silent node's grant arrives after the report: undone, not waited for.
  auto late = m.on_answer(2, granted(1), s.t0 + 150ms);
  ASSERT_EQ(late.undo.size(), 1u);
  EXPECT_EQ(late.undo[0].node, 2u);
  EXPECT_FALSE(late.undo[0].counted);
  EXPECT_FALSE(late.report);
  // A late "busy" wrote nothing: nothing to undo.
  EXPECT_TRUE(m.on_answer(3, busy(5ms), s.t0 + 150ms).undo.empty());
}

TEST(RedlockAcquire, AMajorityThatCameAfterTheValidityIsNoGrant) {
  Masters s;
  s.call.lease = 100ms;  // valid until t0 + 97 ms
  auto m = s.make();
  // The first answer already comes too late: the round fails there, and every
  // grant is undone as it arrives.
  for (std::size_t i = 0; i < 5; ++i) {
    auto e = m.on_answer(i, granted(1), s.t0 + 98ms);
    EXPECT_FALSE(e.report);
    ASSERT_EQ(e.undo.size(), 1u);
    EXPECT_EQ(e.undo[0].node, i);
    EXPECT_TRUE(e.undo[0].counted);
  }
  RedlockAcquire::Effects e;
  for (int i = 0; i < 5; ++i) e = m.on_undo_answer(true);
  ASSERT_TRUE(e.report);
  ASSERT_TRUE(e.report->ok());
  EXPECT_EQ((*e.report)->kind, AcquireOutcome::Kind::busy);
  EXPECT_EQ((*e.report)->hint.kind, WaitHint::Kind::retry) << "try again soon, with a fresh validity";
}

TEST(RedlockAcquire, AReentryGoneOnAMajorityIsLost) {
  Masters s;
  s.call.held = 1;
  auto m = s.make();
  (void)m.on_answer(0, lost(), s.t0);
  (void)m.on_answer(1, lost(), s.t0);
  auto e = m.on_answer(2, busy(100ms), s.t0);
  EXPECT_FALSE(e.report) << "nodes 3 and 4 may still grant: they are waited for";
  EXPECT_TRUE(e.undo.empty()) << "lost and busy wrote nothing";
  (void)m.on_answer(3, lost(), s.t0);
  e = m.on_answer(4, lost(), s.t0);
  ASSERT_TRUE(e.report);
  ASSERT_TRUE(e.report->ok());
  EXPECT_EQ((*e.report)->kind, AcquireOutcome::Kind::lost);
}

TEST(Quorum, CountsEachNodeOnceAndDecidesByMajority) {
  Quorum<int> q(5, 3);
  q.add(0, 1);
  q.add(0, 2);  // ignored
  q.add(1, Status(Errc::unavailable, "a"));
  EXPECT_EQ(q.ok(), 1u);
  EXPECT_EQ(q.failed(), 1u);
  EXPECT_FALSE(q.majority_ok());
  EXPECT_FALSE(q.majority_lost());
  q.add(2, Status(Errc::outcome_unknown, "b"));
  q.add(3, Status(Errc::unavailable, "c"));
  EXPECT_TRUE(q.majority_lost());
  EXPECT_EQ(q.failure("renewal").code(), Errc::outcome_unknown) << "one node may have applied it";
  q.add(4, 1);
  EXPECT_TRUE(q.complete());
  EXPECT_EQ(q.count([](int v) { return v == 1; }), 2u);
}

TEST(Quorum, APermanentErrorWinsOverTransientOnes) {
  Quorum<int> q(3, 2);
  q.add(0, Status(Errc::unavailable, "a"));
  q.add(1, Status(Errc::permission_denied, "NOPERM"));
  const Status s = q.failure("acquire");
  EXPECT_EQ(s.code(), Errc::permission_denied);
  EXPECT_NE(s.message().find("NOPERM"), std::string::npos);
}

}  // namespace
}  // namespace dlock::detail

// Renewal scheduling and loss deadlines with a fake steady clock.
#include "core/renewal_scheduler.hpp"

#include <gtest/gtest.h>

namespace dlock::detail {
namespace {

using namespace std::chrono_literals;
using tp = RenewalScheduler::time_point;

const tp t0{std::chrono::seconds(5000)};

TEST(RenewalScheduler, ValidityCountsFromTheSendTimeMinusDrift) {
  RenewalScheduler s;
  s.add(1, t0, 30000ms, 10000ms, true);
  EXPECT_EQ(s.valid_until(1), t0 + 30000ms - 302ms);
  EXPECT_EQ(s.next_wakeup(), t0 + 10000ms);
}

TEST(RenewalScheduler, LeasesOfDifferentIntervalsShareATickWhenCloseEnough) {
  RenewalScheduler s;
  s.add(1, t0, 30000ms, 10000ms, true);  // due at 10 s
  s.add(2, t0, 24000ms, 8000ms, true);   // due at 8 s
  s.add(3, t0, 60000ms, 20000ms, true);  // due at 20 s
  EXPECT_TRUE(s.take_due(t0 + 3000ms).empty());
  EXPECT_EQ(s.next_wakeup(), t0 + 8000ms);
  // At 8 s, lease 1 (due at 10 s, within half its interval) comes along.
  EXPECT_EQ(s.take_due(t0 + 8000ms), (std::vector<RenewalScheduler::Id>{1, 2}));
  EXPECT_TRUE(s.take_due(t0 + 8000ms).empty()) << "in flight entries are not sent twice";
  s.renewed(1, t0 + 8000ms);
  s.renewed(2, t0 + 8000ms);
  EXPECT_EQ(s.valid_until(1), t0 + 8000ms + 30000ms - 302ms);
  EXPECT_EQ(s.next_wakeup(), t0 + 16000ms);
  // At 16 s lease 2 is due and 1 (due at 18 s) comes along; 3 (20 s) too.
  EXPECT_EQ(s.take_due(t0 + 16000ms), (std::vector<RenewalScheduler::Id>{1, 2, 3}));
}

TEST(RenewalScheduler, LeasesGrantedOverAWholeIntervalJoinOnePhase) {
  RenewalScheduler s;
  for (RenewalScheduler::Id id = 1; id <= 100; ++id)
    s.add(id, t0 + std::chrono::milliseconds(90 * id), 30000ms, 10000ms, true);  // spread over 9 s
  auto due = s.take_due(t0 + 90ms + 10000ms);                                    // the first lease's tick
  EXPECT_EQ(due.size(), 100u) << "every lease joins the first lease's tick";
  for (auto id : due) s.renewed(id, t0 + 10090ms);
  EXPECT_EQ(s.take_due(t0 + 20090ms).size(), 100u);
  // A lease granted later still joins the phase.
  s.add(500, t0 + 21000ms, 30000ms, 10000ms, true);
  EXPECT_EQ(s.next_wakeup(), t0 + 30090ms);
}

TEST(RenewalScheduler, FailingRenewalsAreRetriedAndLostAfterOneInterval) {
  RenewalScheduler s;
  s.add(1, t0, 3000ms, 1000ms, true);
  ASSERT_EQ(s.take_due(t0 + 1000ms).size(), 1u);
  s.failed(1, t0 + 1100ms);
  EXPECT_EQ(s.next_wakeup(), t0 + 1100ms + 250ms);  // retry soon
  EXPECT_TRUE(s.take_lost(t0 + 2000ms).empty());
  ASSERT_EQ(s.take_due(t0 + 1350ms).size(), 1u);
  s.failed(1, t0 + 1400ms);
  auto lost = s.take_lost(t0 + 2100ms);  // failing since 1.1 s + 1 s interval
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].second, LossReason::unreachable);
  EXPECT_FALSE(s.contains(1));
}

TEST(RenewalScheduler, SuccessClearsTheFailureClock) {
  RenewalScheduler s;
  s.add(1, t0, 3000ms, 1000ms, true);
  s.take_due(t0 + 1000ms);
  s.failed(1, t0 + 1000ms);
  s.take_due(t0 + 1250ms);
  s.renewed(1, t0 + 1250ms);
  EXPECT_TRUE(s.take_lost(t0 + 2500ms).empty());
}

TEST(RenewalScheduler, LinkDownRetriesAtOnceAndStartsTheDeadline) {
  RenewalScheduler s;
  s.add(1, t0, 30000ms, 10000ms, true);
  s.link_down(t0 + 2000ms);
  EXPECT_EQ(s.next_wakeup(), t0 + 2000ms);
  EXPECT_EQ(s.take_due(t0 + 2000ms).size(), 1u);
  EXPECT_EQ(s.next_wakeup(), t0 + 12000ms) << "lost one interval after the link dropped";
  EXPECT_EQ(s.take_lost(t0 + 12000ms).size(), 1u);
}

TEST(RenewalScheduler, ValidityBoundsTheLossEvenWhenRenewalsHang) {
  RenewalScheduler s;
  s.add(1, t0, 1000ms, 900ms, true);  // interval close to the lease
  s.take_due(t0 + 900ms);             // in flight, never answered
  auto lost = s.take_lost(t0 + 1000ms - 12ms);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].second, LossReason::unreachable);
}

TEST(RenewalScheduler, FixedLeaseIsNeverRenewedAndExpiresAtValidity) {
  RenewalScheduler s;
  s.add(7, t0, 500ms, 500ms, false);
  EXPECT_TRUE(s.take_due(t0 + 499ms).empty());
  EXPECT_TRUE(s.take_lost(t0 + 400ms).empty());
  auto lost = s.take_lost(t0 + 493ms);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].second, LossReason::expired);
}

TEST(RenewalScheduler, RemovedLeasesLeaveNoTimers) {
  RenewalScheduler s;
  s.add(1, t0, 30000ms, 10000ms, true);
  s.remove(1);
  EXPECT_FALSE(s.next_wakeup().has_value());
}

}  // namespace
}  // namespace dlock::detail

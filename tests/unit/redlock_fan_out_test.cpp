// FanOut: a call asked of every Redlock master, answered once by the first
// decision; no I/O.
#include <gtest/gtest.h>

#include <vector>

#include "redlock/fan_out.hpp"

namespace dlock::redlock {
namespace {

// Decides when a majority said yes, or when a majority can no longer.
std::optional<Status> majority(const detail::Quorum<bool>& q) {
  if (q.majority_ok()) return Status();
  if (q.majority_lost()) return q.failure("connect");
  return std::nullopt;
}

struct Answers {
  std::vector<Status> got;
  std::function<void(Status)> sink() {
    return [this](Status s) { got.push_back(std::move(s)); };
  }
};

TEST(FanOut, AnswersOnceWhenAMajorityDecidesAndDropsTheRest) {
  Answers a;
  FanOut<bool, Status> f(5, 3, a.sink(), majority);
  f.add(0, true);
  f.add(1, Status(Errc::unavailable, "down"));
  f.add(2, true);
  EXPECT_TRUE(a.got.empty());
  EXPECT_FALSE(f.answered());
  f.add(3, true);
  ASSERT_EQ(a.got.size(), 1u);
  EXPECT_TRUE(a.got[0].ok());
  EXPECT_TRUE(f.answered());
  f.add(4, Status(Errc::unavailable, "late"));  // after the decision: dropped
  f.finish(Status(Errc::cancelled, "closed"));
  EXPECT_EQ(a.got.size(), 1u);
}

TEST(FanOut, ALostMajorityIsTheQuorumsFailure) {
  Answers a;
  FanOut<bool, Status> f(3, 2, a.sink(), majority);
  f.add(0, Status(Errc::auth_failed, "WRONGPASS"));
  f.add(0, true);  // a second answer of one master counts once
  EXPECT_TRUE(a.got.empty());
  f.add(2, Status(Errc::auth_failed, "WRONGPASS"));
  ASSERT_EQ(a.got.size(), 1u);
  EXPECT_EQ(a.got[0].code(), Errc::auth_failed);
}

TEST(FanOut, FinishAnswersBeforeAnyDecisionAndOnlyOnce) {
  Answers a;
  FanOut<bool, Status> f(3, 2, a.sink(), majority);
  f.add(0, true);
  f.finish(Status(Errc::cancelled, "client closed"));
  f.add(1, true);
  ASSERT_EQ(a.got.size(), 1u);
  EXPECT_EQ(a.got[0].code(), Errc::cancelled);
}

// Renewals and listings decide only on every answer (a silent master is
// added as a failure when its time is up).
TEST(FanOut, ADecisionMayWaitForEveryAnswer) {
  std::vector<Result<int>> got;
  FanOut<int, Result<int>> f(
      3, 2, [&](Result<int> r) { got.push_back(std::move(r)); },
      [](const detail::Quorum<int>& q) -> std::optional<Result<int>> {
        if (!q.complete()) return std::nullopt;
        int sum = 0;
        for (const auto& a : q.answers())
          if (a) sum += *a;
        return sum;
      });
  f.add(2, 5);
  f.add(0, 7);
  EXPECT_TRUE(got.empty());
  f.add(1, Status(Errc::outcome_unknown, "did not answer in time"));
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(got[0].ok());
  EXPECT_EQ(*got[0], 12);
}

}  // namespace
}  // namespace dlock::redlock

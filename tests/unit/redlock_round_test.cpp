// The Redlock quorum and validity rules, with a fake steady clock.
#include "core/redlock_round.hpp"

#include <gtest/gtest.h>

namespace dlock::detail {
namespace {

using namespace std::chrono_literals;
using D = RedlockRound::Decision;
const RedlockRound::time_point t0{std::chrono::seconds(100)};

TEST(RedlockRound, QuorumIsAStrictMajority) {
  EXPECT_EQ(RedlockRound::quorum(1), 1u);
  EXPECT_EQ(RedlockRound::quorum(3), 2u);
  EXPECT_EQ(RedlockRound::quorum(5), 3u);
  EXPECT_EQ(RedlockRound::quorum(4), 3u);
}

TEST(RedlockRound, GrantedAtTheThirdYesOfFiveWithValidityFromTheStart) {
  RedlockRound r(5, 10000ms, t0);
  EXPECT_EQ(r.vote(0, true, t0 + 3ms), D::pending);
  EXPECT_EQ(r.vote(3, false, t0 + 4ms), D::pending);
  EXPECT_EQ(r.vote(1, true, t0 + 5ms), D::pending);
  EXPECT_EQ(r.vote(4, true, t0 + 7ms), D::granted);
  // 10 000 - 7 elapsed - (100 + 2) drift.
  EXPECT_EQ(r.validity(), 10000ms - 7ms - 102ms);
  EXPECT_EQ(r.not_yes(), (std::vector<std::size_t>{2, 3}));
}

TEST(RedlockRound, TwoOfFiveDownIsStillAGrant) {
  RedlockRound r(5, 1000ms, t0);
  r.vote(0, false, t0 + 1ms);
  r.vote(1, false, t0 + 1ms);
  r.vote(2, true, t0 + 2ms);
  r.vote(3, true, t0 + 2ms);
  EXPECT_EQ(r.vote(4, true, t0 + 2ms), D::granted);
}

TEST(RedlockRound, ThreeOfFiveDownFailsAsSoonAsAMajorityIsOutOfReach) {
  RedlockRound r(5, 1000ms, t0);
  r.vote(0, true, t0 + 1ms);
  r.vote(1, false, t0 + 1ms);
  r.vote(2, false, t0 + 1ms);
  EXPECT_EQ(r.vote(3, false, t0 + 1ms), D::failed) << "no need to wait for node 4";
  // Every node that did not say yes, and the one that did, get a release:
  // the caller releases everywhere; not_yes() lists the doubtful ones.
  EXPECT_EQ(r.not_yes(), (std::vector<std::size_t>{1, 2, 3, 4}));
}

TEST(RedlockRound, AMajorityThatArrivesAfterTheValidityDoesNotCount) {
  RedlockRound r(3, 100ms, t0);
  r.vote(0, true, t0 + 10ms);
  // A slow node answers yes after lease - drift (100 - 3 = 97 ms).
  EXPECT_EQ(r.vote(1, true, t0 + 97ms), D::failed);
  EXPECT_EQ(r.validity(), 0ms);
}

TEST(RedlockRound, ValidityRunningOutWhileWaitingFailsTheRound) {
  RedlockRound r(3, 100ms, t0);
  r.vote(0, true, t0 + 1ms);
  EXPECT_EQ(r.check(t0 + 50ms), D::pending);
  EXPECT_EQ(r.check(r.deadline()), D::failed);
}

TEST(RedlockRound, LateAndRepeatedVotesAreIgnored) {
  RedlockRound r(3, 1000ms, t0);
  r.vote(0, true, t0);
  r.vote(0, true, t0);  // a duplicate does not count twice
  EXPECT_EQ(r.yes_votes(), 1u);
  EXPECT_EQ(r.vote(1, true, t0 + 1ms), D::granted);
  r.vote(2, false, t0 + 2ms);  // after the decision
  EXPECT_EQ(r.decision(), D::granted);
  EXPECT_EQ(r.no_votes(), 0u);
  r.vote(7, true, t0);  // no such node
  EXPECT_EQ(r.yes_votes(), 2u);
}

}  // namespace
}  // namespace dlock::detail

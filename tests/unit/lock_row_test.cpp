// The lease-row decisions (core/lock_row) that the SQLite backend and the
// test fake share: the same answers as the Redis scripts.
#include "core/lock_row.hpp"

#include <gtest/gtest.h>

namespace dlock::detail {
namespace {

using K = AcquireOutcome::Kind;

AcquireCall call(const std::string& owner, std::uint64_t grant, unsigned held) {
  AcquireCall c;
  c.name = "n";
  c.owner = owner;
  c.grant = grant;
  c.held = held;
  c.lease = milliseconds(1000);
  return c;
}

std::uint64_t fences = 0;
std::uint64_t next() { return ++fences; }

TEST(LockRow, AFreeNameIsGrantedWithANewFence) {
  fences = 41;
  auto r = decide_acquire(nullptr, call("a", 7, 0), 100, 1100, next);
  EXPECT_EQ(r.outcome.kind, K::granted);
  EXPECT_EQ(r.outcome.fence, 42u);
  ASSERT_TRUE(r.write);
  EXPECT_EQ(r.write->owner, "a");
  EXPECT_EQ(r.write->grant, 7u);
  EXPECT_EQ(r.write->depth, 1u);
  EXPECT_EQ(r.write->expires_ms, 1100);
}

// Who holds it and since when: set by the grant, kept by every level.
TEST(LockRow, AGrantRecordsItsHolderAndTimeAndALevelKeepsThem) {
  AcquireCall c = call("a", 7, 0);
  c.info = "job[1]@h";
  auto r = decide_acquire(nullptr, c, 100, 1100, next);
  ASSERT_TRUE(r.write);
  EXPECT_EQ(r.write->info, "job[1]@h");
  EXPECT_EQ(r.write->granted_ms, 100);
  AcquireCall level = call("a", 7, 1);
  level.info = "other";
  auto again = decide_acquire(&*r.write, level, 500, 1500, next);
  ASSERT_TRUE(again.write);
  EXPECT_EQ(again.write->info, "job[1]@h");
  EXPECT_EQ(again.write->granted_ms, 100) << "held since the grant, not the last level";
}

TEST(LockRow, AnotherOwnerIsBusyUntilTheLeaseEnds) {
  LockRow held{"a", 7, 1, 5, 900, 0, {}};
  auto r = decide_acquire(&held, call("b", 9, 0), 400, 1400, next);
  EXPECT_EQ(r.outcome.kind, K::busy);
  EXPECT_EQ(r.outcome.hint.kind, WaitHint::Kind::expiry);
  EXPECT_EQ(r.outcome.hint.after.count(), 500);
  EXPECT_FALSE(r.write);
  LockRow session{"a", 7, 1, 5, kNoExpiry, 0, {}};
  EXPECT_EQ(decide_acquire(&session, call("b", 9, 0), 400, 1400, next).outcome.hint.kind, WaitHint::Kind::event);
}

TEST(LockRow, TheSameOwnersOtherGrantIsBusyToo) {
  LockRow held{"a", 7, 1, 5, 900, 0, {}};
  EXPECT_EQ(decide_acquire(&held, call("a", 8, 0), 400, 1400, next).outcome.kind, K::busy);
}

TEST(LockRow, ReentryAddsALevelAndAReplayDoesNotAddTwo) {
  fences = 0;
  LockRow held{"a", 7, 1, 5, 900, 0, {}};
  auto r = decide_acquire(&held, call("a", 7, 1), 400, 1400, next);
  EXPECT_EQ(r.outcome.kind, K::granted);
  EXPECT_EQ(r.outcome.fence, 5u) << "one grant, one fence";
  ASSERT_TRUE(r.write);
  EXPECT_EQ(r.write->depth, 2u);
  EXPECT_EQ(r.write->expires_ms, 1400);
  // The same call again (its reply was lost): depth == held + 1.
  auto replay = decide_acquire(&*r.write, call("a", 7, 1), 450, 1450, next);
  EXPECT_EQ(replay.outcome.kind, K::granted);
  EXPECT_EQ(replay.outcome.depth, 2u);
  EXPECT_EQ(fences, 0u) << "no fence taken for a level";
  // A level never shortens the lease.
  EXPECT_EQ(decide_acquire(&*r.write, call("a", 7, 1), 100, 1200, next).write->expires_ms, 1400);
}

TEST(LockRow, AHoldThatIsGoneIsNeverRecreated) {
  EXPECT_EQ(decide_acquire(nullptr, call("a", 7, 1), 0, 1000, next).outcome.kind, K::lost);
  LockRow other{"b", 9, 1, 6, 900, 0, {}};
  EXPECT_EQ(decide_acquire(&other, call("a", 7, 1), 0, 1000, next).outcome.kind, K::lost);
}

TEST(LockRow, ADepthThatIsNeitherOursNorAReplayIsAMismatch) {
  LockRow held{"a", 7, 3, 5, 900, 0, {}};
  auto r = decide_acquire(&held, call("a", 7, 1), 0, 1000, next);
  EXPECT_EQ(r.outcome.kind, K::mismatch);
  EXPECT_EQ(r.outcome.depth, 3u);
  EXPECT_FALSE(r.write);
}

ReleaseCall release(const std::string& owner, std::uint64_t grant, unsigned held) {
  ReleaseCall c;
  c.name = "n";
  c.owner = owner;
  c.grant = grant;
  c.held = held;
  return c;
}

TEST(LockRow, ReleaseIsOwnerAndGrantChecked) {
  LockRow held{"a", 7, 1, 5, 900, 0, {}};
  EXPECT_EQ(decide_release(nullptr, release("a", 7, 1)).outcome.kind, ReleaseOutcome::Kind::not_held);
  EXPECT_EQ(decide_release(&held, release("b", 7, 1)).outcome.kind, ReleaseOutcome::Kind::not_owner);
  EXPECT_EQ(decide_release(&held, release("a", 8, 1)).outcome.kind, ReleaseOutcome::Kind::not_owner);
  auto r = decide_release(&held, release("a", 7, 1));
  EXPECT_EQ(r.outcome.kind, ReleaseOutcome::Kind::released);
  EXPECT_EQ(r.write, RowRelease::Write::erase);
}

TEST(LockRow, ReleaseDropsOneLevelAndAReplayDropsNone) {
  LockRow held{"a", 7, 2, 5, 900, 0, {}};
  auto r = decide_release(&held, release("a", 7, 2));
  EXPECT_EQ(r.write, RowRelease::Write::update);
  EXPECT_EQ(r.outcome.depth, 1u);
  auto replay = decide_release(&r.row, release("a", 7, 2));  // depth == held - 1
  EXPECT_EQ(replay.outcome.kind, ReleaseOutcome::Kind::released);
  EXPECT_EQ(replay.write, RowRelease::Write::none);
  auto all = release("a", 7, 2);
  all.all = true;
  EXPECT_EQ(decide_release(&held, all).write, RowRelease::Write::erase);
  LockRow deep{"a", 7, 5, 5, 900, 0, {}};
  EXPECT_EQ(decide_release(&deep, release("a", 7, 2)).outcome.kind, ReleaseOutcome::Kind::mismatch);
}

TEST(LockRow, RenewalTellsExpiredFromTaken) {
  LockRow held{"a", 7, 1, 5, 900, 0, {}};
  RenewCall c{"n", "a", 7, milliseconds(1000)};
  EXPECT_EQ(decide_renew(nullptr, c), RenewOutcome::expired);
  EXPECT_EQ(decide_renew(&held, c), RenewOutcome::renewed);
  c.grant = 8;
  EXPECT_EQ(decide_renew(&held, c), RenewOutcome::taken);
}

}  // namespace
}  // namespace dlock::detail

// The line's decisions (core/lock_line): the table the SQLite backend and
// the fake run as C++ and the Redis and PostgreSQL scripts mirror.
#include "core/lock_line.hpp"

#include <gtest/gtest.h>

namespace dlock::detail {
namespace {

using K = AcquireOutcome::Kind;

std::uint64_t fences = 0;
NextFence next = [] { return ++fences; };

AcquireCall call(const std::string& owner, std::uint64_t grant, LockMode mode = LockMode::exclusive,
                 unsigned permits = 0, bool queued = true) {
  AcquireCall c;
  c.name = "n";
  c.owner = owner;
  c.grant = grant;
  c.mode = mode;
  c.permits = permits;
  c.queued = queued;
  c.lease = milliseconds(900);
  return c;
}

ReleaseCall release(const std::string& owner, std::uint64_t grant) {
  ReleaseCall r{"n", owner, 1, false};
  r.grant = grant;
  return r;
}

TEST(LockLine, WaitersAreGrantedInArrivalOrderByTheRelease) {
  LineState s;
  EXPECT_EQ(line_acquire(s, call("a", 1), 0, next).outcome.kind, K::granted);
  EXPECT_EQ(line_acquire(s, call("b", 2), 10, next).outcome.kind, K::busy);
  EXPECT_EQ(line_acquire(s, call("c", 3), 20, next).outcome.kind, K::busy);
  // b retries (its heartbeat): its place does not change.
  EXPECT_EQ(line_acquire(s, call("b", 2), 30, next).outcome.kind, K::busy);
  auto r = line_release(s, release("a", 1), 40, next);
  ASSERT_EQ(r.handed.size(), 1u);
  EXPECT_EQ(r.handed[0].owner, "b") << "the release hands the lock to the head of the line";
  EXPECT_EQ(r.handed[0].lease_ms, call("b", 2).lease.count()) << "the hand-over says the grant's lease";
  // b's next call (a retry racing the hand-over) answers granted, the same fence.
  auto again = line_acquire(s, call("b", 2), 50, next);
  EXPECT_EQ(again.outcome.kind, K::granted);
  EXPECT_EQ(again.outcome.fence, r.handed[0].fence);
  EXPECT_TRUE(again.handed.empty()) << "nobody is told twice";
  EXPECT_EQ(line_acquire(s, call("c", 3), 60, next).outcome.kind, K::busy);
}

TEST(LockLine, ACallerNotInLineDoesNotPassTheLine) {
  LineState s;
  line_acquire(s, call("a", 1), 0, next);
  line_acquire(s, call("b", 2), 0, next);      // waits
  line_release(s, release("a", 1), 10, next);  // b holds now
  line_release(s, release("b", 2), 20, next);  // free, line empty
  line_acquire(s, call("a", 4), 30, next);
  line_acquire(s, call("c", 5), 40, next);  // c waits behind a
  // An unqueued (plain) caller arriving while a holds and c waits is busy,
  // and once a expires it is c, not the newcomer, that gets the lock.
  EXPECT_EQ(line_acquire(s, call("x", 6, LockMode::exclusive, 0, false), 50, next).outcome.kind, K::busy);
  auto late = line_acquire(s, call("x", 6, LockMode::exclusive, 0, false), 935, next);
  EXPECT_EQ(late.outcome.kind, K::busy);
  ASSERT_EQ(late.handed.size(), 1u);
  EXPECT_EQ(late.handed[0].owner, "c") << "a's lease ran out: the next call hands over to c";
}

TEST(LockLine, ADeadWaiterLeavesTheLineAtItsExpiry) {
  LineState s;
  line_acquire(s, call("a", 1), 0, next);
  line_acquire(s, call("dead", 2), 0, next);  // never retries again
  line_acquire(s, call("c", 3), 0, next);
  line_acquire(s, call("c", 3), 800, next);  // c's heartbeat
  auto r = line_release(s, release("a", 1), 950, next);
  ASSERT_EQ(r.handed.size(), 1u);
  EXPECT_EQ(r.handed[0].owner, "c") << "the dead waiter's place expired (server time)";
}

TEST(LockLine, AnAbandonedHandOverGoesToTheNextInLine) {
  LineState s;
  line_acquire(s, call("a", 1), 0, next);
  line_acquire(s, call("b", 2), 0, next);
  line_acquire(s, call("c", 3), 0, next);
  auto r = line_release(s, release("a", 1), 10, next);  // to b, who timed out meanwhile
  ASSERT_EQ(r.handed.at(0).owner, "b");
  AbandonCall gave_up{"n", "b", 0, 2, 0, true};
  auto handed = line_abandon(s, gave_up, 11, next);
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_EQ(handed[0].owner, "c");
  EXPECT_EQ(s.holders.size(), 1u);
}

TEST(LockLine, ReadersShareAndAWaitingWriterHoldsBackLaterReaders) {
  LineState s;
  EXPECT_EQ(line_acquire(s, call("r1", 1, LockMode::shared), 0, next).outcome.kind, K::granted);
  EXPECT_EQ(line_acquire(s, call("r2", 2, LockMode::shared), 0, next).outcome.kind, K::granted);
  EXPECT_EQ(line_acquire(s, call("w", 3), 0, next).outcome.kind, K::busy);
  EXPECT_EQ(line_acquire(s, call("r3", 4, LockMode::shared), 0, next).outcome.kind, K::busy)
      << "behind the waiting writer";
  line_release(s, release("r1", 1), 10, next);
  auto r = line_release(s, release("r2", 2), 20, next);
  ASSERT_EQ(r.handed.size(), 1u);
  EXPECT_EQ(r.handed[0].owner, "w");
  const auto writer_fence = r.handed[0].fence;
  auto after = line_release(s, release("w", 3), 30, next);
  ASSERT_EQ(after.handed.size(), 1u);
  EXPECT_EQ(after.handed[0].owner, "r3");
  EXPECT_GT(writer_fence, 2u) << "a writer's fence is above every fence granted before it";
}

TEST(LockLine, SeveralReadersAreHandedTheLockAtOnce) {
  LineState s;
  line_acquire(s, call("w", 1), 0, next);
  line_acquire(s, call("r1", 2, LockMode::shared), 0, next);
  line_acquire(s, call("r2", 3, LockMode::shared), 0, next);
  line_acquire(s, call("w2", 4), 0, next);
  auto r = line_release(s, release("w", 1), 10, next);
  ASSERT_EQ(r.handed.size(), 2u);
  EXPECT_EQ(s.line.size(), 1u) << "the second writer waits for both";
}

TEST(LockLine, PermitsBoundTheHoldersAndMustAgree) {
  LineState s;
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(line_acquire(s, call("p" + std::to_string(i), i + 1, LockMode::shared, 3), 0, next).outcome.kind,
              K::granted);
  EXPECT_EQ(line_acquire(s, call("p3", 9, LockMode::shared, 3), 0, next).outcome.kind, K::busy);
  auto bad = line_acquire(s, call("q", 10, LockMode::shared, 5), 0, next);
  EXPECT_EQ(bad.error.code(), Errc::invalid_argument);
  EXPECT_NE(bad.error.message().find("3"), std::string::npos);
  EXPECT_EQ(line_info(s, 0).holders, 3u);
  EXPECT_EQ(*line_info(s, 0).waiters, 1u);
  // A permit that lapses comes back without anyone releasing it.
  EXPECT_EQ(line_info(s, 950).holders, 0u);
}

TEST(LockLine, AChangeOfModeByAHolderIsRefused) {
  LineState s;
  line_acquire(s, call("o", 1, LockMode::shared), 0, next);
  EXPECT_EQ(line_acquire(s, call("o", 2), 0, next).error.code(), Errc::precondition_failed);
  EXPECT_TRUE(s.line.empty()) << "it did not join the line to wait for itself";
}

TEST(LockLine, ReplaysAndReentriesCountLikeAPlainLock) {
  LineState s;
  auto c = call("a", 1);
  auto g = line_acquire(s, c, 0, next);
  c.held = 1;
  auto level = line_acquire(s, c, 0, next);
  EXPECT_EQ(level.outcome.depth, 2u);
  EXPECT_EQ(level.outcome.fence, g.outcome.fence) << "one grant, one fence";
  EXPECT_EQ(line_acquire(s, c, 0, next).outcome.depth, 2u) << "a replay";
  c.held = 5;
  EXPECT_EQ(line_acquire(s, c, 0, next).outcome.kind, K::mismatch);
  auto other = call("a", 7);
  other.held = 1;
  EXPECT_EQ(line_acquire(s, other, 0, next).outcome.kind, K::lost) << "never re-created";
}

TEST(LockLine, ATombstonedGrantIsNeverMadeByAStrayCopy) {
  LineState s;
  AbandonCall gone{"n", "a", 0, 1, 0, true};
  gone.tombstone = milliseconds(500);
  line_abandon(s, gone, 0, next);
  EXPECT_EQ(line_acquire(s, call("a", 1), 100, next).outcome.kind, K::lost);
  EXPECT_EQ(line_acquire(s, call("a", 1), 600, next).outcome.kind, K::granted) << "the tombstone ran out";
}

TEST(LockLine, AQueuedCallerIsToldToRetryWithinAThirdOfItsLease) {
  LineState s;
  auto holder = call("a", 1);
  holder.lease = milliseconds(100000);
  line_acquire(s, holder, 0, next);
  auto w = line_acquire(s, call("b", 2), 0, next);
  EXPECT_EQ(w.outcome.hint.kind, WaitHint::Kind::expiry);
  EXPECT_EQ(w.outcome.hint.after.count(), 300) << "its heartbeat keeps its place";
}

}  // namespace
}  // namespace dlock::detail

// The line's decisions (core/lock_line) beyond the decision table
// (tests/decisions/locks.table, run on the fake in lock_table_test): what a
// hand-over tells its recipient, and the error naming disagreeing permits.
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

}  // namespace
}  // namespace dlock::detail

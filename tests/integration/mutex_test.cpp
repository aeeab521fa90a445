// The Mutex and Lease contracts against a real redis-server.
#include "integration/common.hpp"

namespace dlock::test {
namespace {

class MutexTest : public ::testing::Test {
 protected:
  RedisServer server;
  LogSink log;
  Client client = Client::connect(server.url(), quiet(log));
};

TEST_F(MutexTest, ExcludesOtherOwners) {
  Mutex a(client, "m1"), b(client, "m1");
  ASSERT_TRUE(a.try_lock());
  EXPECT_FALSE(b.try_lock());
  a.unlock();
  EXPECT_TRUE(b.try_lock());
  EXPECT_FALSE(a.try_lock());
  b.unlock();
}

TEST_F(MutexTest, WorksWithStdLockTypes) {
  Mutex m(client, "m2");
  {
    std::unique_lock lk(m);
    EXPECT_TRUE(m.owns());
    EXPECT_GT(m.fence(), 0u);
  }
  EXPECT_FALSE(m.owns());
  {
    std::lock_guard lk(m);
    EXPECT_TRUE(client.inspect("m2").value().held);
  }
  EXPECT_FALSE(client.inspect("m2").value().held);
  std::unique_lock lk(m, std::defer_lock);
  EXPECT_TRUE(lk.try_lock_for(100ms));
}

TEST_F(MutexTest, ReentryIsCountedAndKeepsItsFence) {
  Mutex m(client, "m3");
  m.lock();
  auto fence = m.fence();
  m.lock();
  EXPECT_EQ(m.held(), 2u);
  EXPECT_EQ(m.fence(), fence);
  auto info = client.inspect("m3").value();
  EXPECT_EQ(info.reentry_count, 2u);
  m.unlock();
  EXPECT_TRUE(client.inspect("m3").value().held) << "one level remains";
  EXPECT_EQ(client.inspect("m3").value().reentry_count, 1u);
  m.unlock();
  EXPECT_FALSE(client.inspect("m3").value().held);
}

TEST_F(MutexTest, ExplicitOwnerReentersAcrossObjects) {
  LockOptions o;
  o.owner = "request-7f3a";
  Mutex a(client, "m4", o), b(client, "m4", o);
  ASSERT_TRUE(a.try_lock());
  EXPECT_TRUE(b.try_lock()) << "same owner: a re-entry";
  EXPECT_EQ(client.inspect("m4").value().reentry_count, 2u);
  b.unlock();
  a.unlock();
  EXPECT_FALSE(client.inspect("m4").value().held);
}

TEST_F(MutexTest, FencesIncreaseAcrossHolders) {
  std::uint64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    Mutex m(client, "m5");
    std::unique_lock lk(m);
    EXPECT_GT(m.fence(), last);
    last = m.fence();
  }
  EXPECT_EQ(client.inspect("m5").value().last_fence, last);
}

TEST_F(MutexTest, DoubleUnlockIsReportedNotThrown) {
  Mutex m(client, "m6");
  m.lock();
  m.unlock();
  m.unlock();  // noexcept
  EXPECT_EQ(m.last_release_status().code(), Errc::not_held);
  EXPECT_EQ(m.release().code(), Errc::not_held);
  EXPECT_EQ(client.stats().release_failures, 1u) << "the swallowed failure is counted";
  EXPECT_THROW((void)m.fence(), Error);
}

TEST_F(MutexTest, ReleaseByANonOwnerIsRejectedAndTouchesNothing) {
  LockOptions short_lease;
  short_lease.lease = 150ms;
  auto stale = client.try_acquire("m7", short_lease).value();
  std::this_thread::sleep_for(250ms);  // the stale holder's lease runs out
  auto fresh = client.try_acquire("m7").value();
  EXPECT_TRUE(stale.lost()) << "the fixed lease's end was signalled";
  Status s = stale.release();
  EXPECT_EQ(s.code(), Errc::not_owner);
  EXPECT_EQ(s.next_step(), NextStep::give_up);
  auto info = client.inspect("m7").value();
  EXPECT_TRUE(info.held) << "the new owner's lock must be untouched";
  EXPECT_EQ(info.fence, fresh.fence());
  EXPECT_TRUE(fresh.release().ok());
}

TEST_F(MutexTest, ReleaseOfAnExpiredLeaseSaysNotHeld) {
  LockOptions short_lease;
  short_lease.lease = 100ms;
  auto l = client.try_acquire("m8", short_lease).value();
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(l.release().code(), Errc::not_held);
  EXPECT_EQ(l.release().code(), Errc::not_held) << "an empty lease stays not_held";
}

TEST_F(MutexTest, WaitTimeoutIsHonoured) {
  Mutex holder(client, "m9"), waiter(client, "m9");
  holder.lock();
  auto t0 = Clock::now();
  EXPECT_FALSE(waiter.try_lock_for(300ms));
  auto waited = ms_since(t0);
  EXPECT_GE(waited, 300);
  EXPECT_LT(waited, 3000);
  auto r = client.acquire("m9", 200ms);
  EXPECT_EQ(r.code(), Errc::timeout);
  EXPECT_EQ(r.status().next_step(), NextStep::retry);
  EXPECT_EQ(client.try_acquire("m9").code(), Errc::busy);
}

TEST_F(MutexTest, WaiterIsWokenByTheReleaseNotByTheLease) {
  Mutex holder(client, "m10");  // 30 s watchdog lease
  holder.lock();
  std::atomic<long long> waited{-1};
  std::thread t([&] {
    Mutex waiter(client, "m10");
    auto t0 = Clock::now();
    waiter.lock();
    waited = ms_since(t0);
  });
  std::this_thread::sleep_for(300ms);
  auto released_at = Clock::now();
  holder.unlock();
  t.join();
  auto handoff = ms_since(released_at);
  measure("release_to_waiter_handoff", handoff);
  EXPECT_LT(handoff, 2000) << "woken by the release publication, not by the 30 s lease";
}

TEST_F(MutexTest, LocalWaitersAreServedOneAtATime) {
  constexpr int kWaiters = 6;
  Mutex holder(client, "m11");
  holder.lock();
  std::atomic<int> inside{0}, max_inside{0}, done{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < kWaiters; ++i) {
    ts.emplace_back([&] {
      Mutex m(client, "m11");
      std::unique_lock lk(m);
      int now = ++inside;
      max_inside = std::max(max_inside.load(), now);
      std::this_thread::sleep_for(10ms);
      --inside;
      ++done;
    });
  }
  std::this_thread::sleep_for(200ms);
  holder.unlock();
  for (auto& t : ts) t.join();
  EXPECT_EQ(done.load(), kWaiters);
  EXPECT_EQ(max_inside.load(), 1);
}

TEST_F(MutexTest, WithLockRunsAndReleases) {
  const std::uint64_t v = with_lock(client, "m12", 1s, [](const Lease& l) { return l.fence(); });
  EXPECT_GT(v, 0u);
  EXPECT_FALSE(client.inspect("m12").value().held);
  EXPECT_THROW(with_lock(client, "m12", 1s, [](const Lease&) -> int { throw std::runtime_error("boom"); }),
               std::runtime_error);
  EXPECT_FALSE(client.inspect("m12").value().held) << "released when the body throws";
}

TEST_F(MutexTest, LeaseDestructorReleases) {
  { auto l = client.try_acquire("m13").value(); }
  EXPECT_FALSE(client.inspect("m13").value().held);
}

TEST_F(MutexTest, DestroyingTheClientReleasesAndSignalsLeases) {
  Lease kept;
  std::stop_token token;
  {
    auto other = Client::connect(server.url(), quiet(log));
    kept = other.try_acquire("m14").value();
    token = kept.lost_token();
    EXPECT_FALSE(token.stop_requested());
  }  // the last handle of `other` goes: its locks are released
  EXPECT_TRUE(token.stop_requested());
  EXPECT_FALSE(client.inspect("m14").value().held);
  EXPECT_EQ(kept.release().code(), Errc::cancelled);
}

}  // namespace
}  // namespace dlock::test

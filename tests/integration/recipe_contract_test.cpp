// The recipes' contract, one suite run against every backend (backend_envs):
// fair locks grant in arrival order, SharedMutex lets readers overlap and
// never starves a writer, Semaphore never has more holders than permits,
// Election's terms increase. A backend that refuses them (Redlock) is tested
// for a clear refusal instead.
#include <dlock/dlock.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend_envs.hpp"
#include "support/status_matchers.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

class RecipeContract : public ::testing::TestWithParam<Backend> {
 protected:
  std::unique_ptr<Env> env = GetParam().make();
  Client client = env->client();

  // Waits until the server counts `n` waiters on `name` (their places are
  // taken in the order the test starts them).
  void await_waiters(const std::string& name, unsigned n) {
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < until) {
      auto info = client.inspect(name);
      if (info.ok() && info->waiters.value_or(0) >= n) return;
      std::this_thread::sleep_for(5ms);
    }
    FAIL() << "waiters on " << name << " never reached " << n;
  }
};

LockOptions fair() {
  LockOptions o;
  o.fair = true;
  return o;
}

TEST_P(RecipeContract, ABackendWithoutLinesRefusesEveryRecipeSayingWhy) {
  if (env->lines()) GTEST_SKIP() << "offers them (the other tests)";
  auto r = client.acquire("f", 0ms, fair());
  EXPECT_THAT(r.status(), StatusIs(Errc::invalid_argument));
  EXPECT_THAT(r.status().message(), HasSubstr("majority"));
  SharedMutex rw(client, "rw");
  EXPECT_THROW(rw.lock_shared(), Error);
  Semaphore sem(client, "s", 2);
  EXPECT_THROW(sem.try_acquire(), Error);
  Election e(client, "e", "me");
  EXPECT_THAT(e.campaign(0ms).status(), StatusIs(Errc::invalid_argument));
}

TEST_P(RecipeContract, AFairLockGrantsInArrivalOrder) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  Lease first = client.acquire("line", 5s, fair()).value();
  constexpr int kWaiters = 4;
  std::vector<Client> clients;
  for (int i = 0; i < kWaiters; ++i) clients.push_back(env->client());
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      Lease l = clients[i].acquire("line", 20s, fair()).value();
      std::lock_guard lk(mu);
      order.push_back(i);
    });
    await_waiters("line", i + 1);
  }
  ASSERT_THAT(first.release(), IsOk());
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_FALSE(client.inspect("line")->held);
}

TEST_P(RecipeContract, AWaiterThatGivesUpLeavesTheLineWithoutStallingIt) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  Lease holder = client.acquire("giveup", 5s, fair()).value();
  Client quitter_client = env->client(), stayer_client = env->client();
  auto quitter = std::async(std::launch::async, [&] { return quitter_client.acquire("giveup", 300ms, fair()); });
  await_waiters("giveup", 1);
  auto stayer = std::async(std::launch::async, [&] { return stayer_client.acquire("giveup", 20s, fair()); });
  await_waiters("giveup", 2);
  EXPECT_THAT(quitter.get().status(), StatusIs(Errc::timeout));
  ASSERT_THAT(holder.release(), IsOk());
  auto got = stayer.get();
  ASSERT_THAT(got.status(), IsOk()) << "the line went on past the waiter that left";
  EXPECT_GT(got->fence(), 0u);
}

TEST_P(RecipeContract, AWaiterTimingOutAsTheReleaseArrivesLeavesNothingHeld) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  // Many rounds with the release and the waiter's deadline close together:
  // whichever wins, the lock must end up free or with the next waiter.
  for (int round = 0; round < 15; ++round) {
    const std::string name = "race" + std::to_string(round);
    Lease holder = client.acquire(name, 5s, fair()).value();
    Client other = env->client();
    auto waiter = std::async(std::launch::async, [&] { return other.acquire(name, 60ms, fair()); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + round % 5 * 4));
    (void)holder.release();
    auto r = waiter.get();
    if (r.ok()) ASSERT_THAT(r->release(), IsOk());
    auto after = client.acquire(name, 5s, fair());
    ASSERT_THAT(after.status(), IsOk()) << "round " << round << ": the lock stayed held";
  }
}

TEST_P(RecipeContract, ReadersOverlapAndAWriterWaitsForThem) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  Client c2 = env->client();
  SharedMutex r1(client, "rw"), r2(c2, "rw"), w(env->client(), "rw");
  std::shared_lock a(r1);
  ASSERT_TRUE(r2.try_lock_shared_for(5s)) << "a second reader is let in beside the first";
  EXPECT_EQ(client.inspect("rw")->holders, 2u);
  EXPECT_TRUE(client.inspect("rw")->shared);
  EXPECT_FALSE(w.try_lock_for(200ms)) << "a writer waits for the readers";
  const auto reader_fence = r2.fence();
  r2.unlock_shared();
  a.unlock();
  ASSERT_TRUE(w.try_lock_for(5s));
  EXPECT_GT(w.fence(), reader_fence) << "a writer's fence is above every fence granted before it";
  w.unlock();
}

TEST_P(RecipeContract, ReadersArrivingWhileAWriterWaitsQueueBehindIt) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  Client cw = env->client(), cr = env->client();
  SharedMutex first(client, "wq"), writer(cw, "wq"), late(cr, "wq");
  first.lock_shared();
  auto w = std::async(std::launch::async, [&] { return writer.try_lock_for(20s); });
  await_waiters("wq", 1);
  EXPECT_FALSE(late.try_lock_shared_for(300ms)) << "a reader does not pass a waiting writer";
  first.unlock_shared();
  ASSERT_TRUE(w.get());
  auto r = std::async(std::launch::async, [&] { return late.try_lock_shared_for(20s); });
  await_waiters("wq", 1);
  writer.unlock();
  EXPECT_TRUE(r.get());
  late.unlock_shared();
}

TEST_P(RecipeContract, AnUpgradeIsRefusedNotDeadlocked) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  SharedMutex rw(client, "up");
  rw.lock_shared();
  try {
    rw.lock();
    FAIL() << "an upgrade was granted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::precondition_failed);
  }
  rw.unlock_shared();
  // std::unique_lock / std::shared_lock work with it.
  { std::unique_lock wr(rw); }
  { std::shared_lock rd(rw); }
}

TEST_P(RecipeContract, ASemaphoreNeverHasMoreHoldersThanPermits) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  std::vector<Client> clients;
  std::vector<std::unique_ptr<Semaphore>> sems;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(env->client());
    sems.push_back(std::make_unique<Semaphore>(clients.back(), "sem", 3));
  }
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(sems[i]->try_acquire_for(5s)) << "permit " << i;
  EXPECT_EQ(client.inspect("sem")->holders, 3u);
  EXPECT_FALSE(sems[3]->try_acquire_for(200ms)) << "a fourth holder";
  auto fourth = std::async(std::launch::async, [&] { return sems[3]->try_acquire_for(20s); });
  await_waiters("sem", 1);
  sems[1]->release();
  EXPECT_TRUE(fourth.get()) << "a released permit goes to the waiter";
  EXPECT_EQ(client.inspect("sem")->holders, 3u);
  Semaphore disagree(env->client(), "sem", 5);
  try {
    disagree.try_acquire();
    FAIL() << "a client with another permit count was let in";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("3"));
  }
}

TEST_P(RecipeContract, ALapsedPermitComesBackWithoutAnotherAcquire) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  if (env->session_held()) GTEST_SKIP() << "a session keeps permits: its end frees them (zookeeper_lines_test)";
  LockOptions brief;
  brief.lease = 300ms;  // the holder stops renewing: as if it crashed
  Semaphore crashed(env->client(), "lapse", 1, brief);
  ASSERT_TRUE(crashed.try_acquire());
  EXPECT_EQ(client.inspect("lapse")->holders, 1u);
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(client.inspect("lapse")->holders, 0u) << "inspect counts only live permits";
  Semaphore next(env->client(), "lapse", 1);
  EXPECT_TRUE(next.try_acquire());
}

TEST_P(RecipeContract, AnElectionHasOneLeaderPerTermAndObserversSeeEachChange) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  Client cb = env->client(), co = env->client();
  Election a(client, "lead", "node-a"), b(cb, "lead", "node-b"), watcher(co, "lead", "watcher");
  std::mutex mu;
  std::vector<std::optional<LeaderInfo>> seen;
  Observation obs = watcher.observe([&](const std::optional<LeaderInfo>& l) {
    std::lock_guard lk(mu);
    seen.push_back(l);
  });
  Leadership la = a.campaign(5s).value();
  EXPECT_EQ(a.leader()->value(), (LeaderInfo{"node-a", la.term()}));
  EXPECT_THAT(b.campaign(0ms).status(), StatusIs(Errc::busy));
  auto lb = std::async(std::launch::async, [&] { return b.campaign(20s); });
  await_waiters("lead", 1);
  ASSERT_THAT(la.resign(), IsOk());
  auto won = lb.get();
  ASSERT_THAT(won.status(), IsOk());
  EXPECT_GT(won->term(), la.term()) << "terms strictly increase";
  EXPECT_EQ(watcher.leader()->value(), (LeaderInfo{"node-b", won->term()}));
  const auto until = std::chrono::steady_clock::now() + 5s;
  for (;;) {
    {
      std::lock_guard lk(mu);
      if (!seen.empty() && seen.back() == LeaderInfo{"node-b", won->term()}) break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "the observer never saw node-b lead";
    std::this_thread::sleep_for(10ms);
  }
  obs.stop();
  std::lock_guard lk(mu);
  bool saw_a = false;
  for (const auto& l : seen) saw_a |= l && l->id == "node-a";
  EXPECT_TRUE(saw_a) << "the observer saw node-a lead first";
}

INSTANTIATE_TEST_SUITE_P(Backends, RecipeContract, ::testing::ValuesIn(kBackends),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace dlock::test

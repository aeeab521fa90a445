// Mutual exclusion across processes: forked workers increment a non-atomic
// GET/SET counter under the lock; any overlap would lose updates.
#include <signal.h>

#include <sstream>

#include "integration/common.hpp"

namespace dlock::test {
namespace {

TEST(CrossProcess, CounterUnderTheLockIsExact) {
  RedisServer server;
  constexpr int kProcs = 4, kIncrements = 100;
  const std::string url = server.url();
  const int port = server.port();
  // Fork before this process creates any client (see fork_child).
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    kids.push_back(fork_child([url, port] {
      LogSink log;
      auto client = Client::connect(url, quiet(log));
      SyncRedis redis(port);
      Mutex m(client, "counter");
      for (int i = 0; i < kIncrements; ++i) {
        std::unique_lock lk(m);
        std::string cur = redis.cmd({"GET", "counter"});
        long long v = cur == "(nil)" ? 0 : std::stoll(cur);
        std::this_thread::yield();  // widen the race window a little
        redis.cmd({"SET", "counter", std::to_string(v + 1)});
        // Grant order: the list is appended inside the critical section.
        redis.cmd({"RPUSH", "fences", std::to_string(m.fence())});
      }
      return 0;
    }));
  }
  for (pid_t k : kids) EXPECT_EQ(wait_exit(k, 120s), 0);
  SyncRedis redis(port);
  EXPECT_EQ(redis.integer({"GET", "counter"}), kProcs * kIncrements);
  auto fences = redis.cmd({"LRANGE", "fences", "0", "-1"});
  std::istringstream in(fences);
  long long prev = 0, count = 0, f = 0;
  while (in >> f) {
    EXPECT_GT(f, prev) << "fences must strictly increase in grant order";
    prev = f;
    ++count;
  }
  EXPECT_EQ(count, kProcs * kIncrements);
}

TEST(CrossProcess, NaiveCounterWithoutTheLockLosesUpdates) {
  // The control experiment: the same workload without the lock. It shows the
  // exact-count test above can fail.
  RedisServer server;
  constexpr int kProcs = 4, kIncrements = 200;
  const int port = server.port();
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    kids.push_back(fork_child([port] {
      SyncRedis redis(port);
      for (int i = 0; i < kIncrements; ++i) {
        std::string cur = redis.cmd({"GET", "counter"});
        long long v = cur == "(nil)" ? 0 : std::stoll(cur);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        redis.cmd({"SET", "counter", std::to_string(v + 1)});
      }
      return 0;
    }));
  }
  for (pid_t k : kids) EXPECT_EQ(wait_exit(k, 120s), 0);
  SyncRedis redis(port);
  EXPECT_LT(redis.integer({"GET", "counter"}), kProcs * kIncrements);
}

TEST(CrossProcess, KilledHolderCostsAtMostItsLease) {
  RedisServer server;
  const std::string url = server.url();
  const int port = server.port();
  pid_t holder = fork_child([url, port] {
    LogSink log;
    auto client = Client::connect(url, quiet(log));
    LockOptions o;
    o.watchdog_lease = 2000ms;
    o.renew_interval = 500ms;
    auto lease = client.try_acquire("job", o);
    if (!lease.ok()) return 3;
    SyncRedis(port).cmd({"SET", "holder-ready", "1"});
    std::this_thread::sleep_for(60s);  // killed long before
    return 0;
  });
  SyncRedis redis(port);
  ASSERT_TRUE(eventually([&] { return redis.cmd({"GET", "holder-ready"}) == "1"; }, 10s));
  LogSink log;
  auto client = Client::connect(url, quiet(log));
  std::this_thread::sleep_for(700ms);  // at least one renewal happened
  ASSERT_EQ(::kill(holder, SIGKILL), 0);
  auto killed_at = Clock::now();
  ASSERT_EQ(wait_exit(holder, 5s), 128 + SIGKILL);
  auto lease = client.acquire("job", 10s);
  auto recovery = ms_since(killed_at);
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  measure("sigkill_recovery", recovery);
  // The lease was renewed at most 500 ms before the kill, so it runs out
  // within 2 s of it; the waiter sleeps exactly until the holder's PTTL ends.
  EXPECT_LE(recovery, 2000 + 500);
}

}  // namespace
}  // namespace dlock::test

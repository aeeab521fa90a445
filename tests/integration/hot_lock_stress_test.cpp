// Many threads with tiny waits on one hot lock: what a web service with a
// short lock wait per request does. Waiters time out at the moment releases
// arrive, handles come and go: the wake path's lifetime rules under load.
// Runs in every sanitizer stage (it is an ordinary integration test).
#include <atomic>
#include <memory>
#include <random>

#include "integration/common.hpp"

namespace dlock::test {
namespace {

struct Tally {
  std::atomic<long> grants{0};
  std::atomic<long> timeouts{0};
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  std::atomic<long> errors{0};
};

// Seven threads, each making its own Mutex per loop on one name; waits of
// 0-3 ms (one thread 50 ms), holds up to 300 us.
void hammer(const Client& client, const std::string& name, std::chrono::milliseconds run_for, Tally& t) {
  std::vector<std::thread> threads;
  const auto end = Clock::now() + run_for;
  for (int i = 0; i < 7; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937 rng(static_cast<unsigned>(i) * 7919u + 1u);
      while (Clock::now() < end) {
        Mutex m(client, name);
        const auto wait = i == 0 ? 50ms : std::chrono::milliseconds(rng() % 4);
        bool got = false;
        try {
          got = m.try_lock_for(wait);
        } catch (const Error&) {
          t.errors.fetch_add(1);
          continue;
        }
        if (!got) {
          t.timeouts.fetch_add(1);
          continue;
        }
        const int now_inside = t.inside.fetch_add(1) + 1;
        int seen = t.max_inside.load();
        while (now_inside > seen && !t.max_inside.compare_exchange_weak(seen, now_inside)) {
        }
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
        t.inside.fetch_sub(1);
        t.grants.fetch_add(1);
        m.unlock();
      }
    });
  }
  for (auto& th : threads) th.join();
}

TEST(HotLockStress, SingleServerManyThreadsTinyWaits) {
  RedisServer server;
  LogSink log;
  Client client = Client::connect(server.url(), quiet(log));
  Tally t;
  hammer(client, "hot", 3s, t);
  EXPECT_GT(t.grants.load(), 0);
  EXPECT_GT(t.timeouts.load(), 0) << "the waits are meant to run out while releases arrive";
  EXPECT_EQ(t.max_inside.load(), 1) << "two holders at once";
  EXPECT_EQ(t.errors.load(), 0);
  EXPECT_FALSE(client.inspect("hot").value().held) << "nothing left behind";
  measure("hot_lock_grants", t.grants.load(), "");
  measure("hot_lock_timeouts", t.timeouts.load(), "");
}

TEST(HotLockStress, RedlockManyThreadsTinyWaits) {
  std::vector<std::unique_ptr<RedisServer>> servers;
  std::string url = "redlock://";
  for (int i = 0; i < 3; ++i) {
    servers.push_back(std::make_unique<RedisServer>());
    url += (i ? "," : "") + servers.back()->host_port();
  }
  LogSink log;
  Client client = Client::connect(url, quiet(log));
  Tally t;
  hammer(client, "hot", 3s, t);
  EXPECT_GT(t.grants.load(), 0);
  EXPECT_GT(t.timeouts.load(), 0);
  EXPECT_EQ(t.max_inside.load(), 1) << "two holders at once";
  EXPECT_EQ(t.errors.load(), 0);
  EXPECT_TRUE(eventually([&] { return !client.inspect("hot").value().held; }, 2s)) << "nothing left behind";
}

}  // namespace
}  // namespace dlock::test

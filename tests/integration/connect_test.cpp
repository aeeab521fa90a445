// Connecting, reconnecting and pipelining against a real redis-server.
#include "integration/common.hpp"

namespace dlock::test {
namespace {

TEST(Connect, ConnectsAndInspectsAFreeLock) {
  RedisServer server;
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  auto info = client.inspect("nobody-holds-this").value();
  EXPECT_FALSE(info.held);
  EXPECT_EQ(info.fence, 0u);
  EXPECT_EQ(info.reentry_count, 0u);
}

TEST(Connect, SelectsTheDatabaseFromTheUrl) {
  RedisServer server;
  LogSink log;
  auto client = Client::connect(server.url() + "/3", quiet(log));
  auto lease = client.try_acquire("in-db-3").value();
  SyncRedis redis(server.port());
  EXPECT_EQ(redis.integer({"EXISTS", "dlock:{in-db-3}"}), 0) << "the lock must not be in db 0";
  redis.cmd({"SELECT", "3"});
  EXPECT_EQ(redis.integer({"EXISTS", "dlock:{in-db-3}"}), 1);
}

TEST(Connect, KeyPrefixIsConfigurable) {
  RedisServer server;
  LogSink log;
  auto opts = quiet(log);
  opts.key_prefix = "myapp:locks:";
  auto client = Client::connect(server.url(), opts);
  auto lease = client.try_acquire("job").value();
  SyncRedis redis(server.port());
  EXPECT_EQ(redis.integer({"EXISTS", "myapp:locks:{job}"}), 1);
  EXPECT_EQ(redis.integer({"EXISTS", "myapp:locks:fence"}), 1);
  lease = Lease();
  EXPECT_EQ(redis.integer({"DBSIZE"}), 1) << "a released lock leaves only the shared fence counter";
}

TEST(Connect, ReconnectsAfterTheServerRestarts) {
  RedisServer server;
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  ASSERT_TRUE(client.try_acquire("before").ok());
  server.stop();
  server.start();
  // The first call after the restart may find the connection still down;
  // within a couple of seconds it must work again.
  bool ok = eventually([&] { return client.try_acquire("after").ok(); }, 5000ms);
  EXPECT_TRUE(ok);
  EXPECT_GE(client.stats().reconnects, 1u);
}

TEST(Connect, ManyThreadsShareOnePipelinedConnection) {
  RedisServer server;
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  constexpr int kThreads = 32, kRounds = 40;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        auto lease = client.try_acquire("pipe:" + std::to_string(t));
        if (!lease.ok() || !lease->release().ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto stats = client.stats();
  EXPECT_EQ(stats.grants, static_cast<std::uint64_t>(kThreads * kRounds));
  EXPECT_EQ(stats.leases_held, 0u);
}

}  // namespace
}  // namespace dlock::test

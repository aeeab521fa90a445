// A server that vanishes from the network: its open connections end, and new
// ones hang in SYN (nothing answers) until the client's own connect timeout.
// A blocking call must still return by its deadline, and a Redlock round
// must still decide on the masters that answer, within its window: a
// connection opened inside a call is bounded by the call, not by
// ClientOptions::connect_timeout.
#include <chrono>
#include <memory>
#include <thread>

#include "integration/common.hpp"
#include "support/tcp_fault.hpp"

namespace dlock::test {
namespace {

using Clock = std::chrono::steady_clock;

LockOptions lease_of(milliseconds lease) {
  LockOptions o;
  o.lease = lease;
  return o;
}

// Longer than any deadline below: a call held by a connect shows.
constexpr milliseconds kConnectTimeout{6000};

ClientOptions patient_connects(LogSink& log) {
  ClientOptions o = quiet(log);
  o.connect_timeout = kConnectTimeout;
  o.command_timeout = 300ms;  // Redlock's window per master: a round decides within about this
  return o;
}

// The blocking path's pooled connection was closed by the stall; after a
// second idle it is checked before use, found closed, and a new one opened.
void let_the_pool_notice() { std::this_thread::sleep_for(1200ms); }

TEST(StalledConnect, ABlockingAcquireReturnsByItsDeadline) {
  RedisServer server;
  TcpFault net(server.port());
  LogSink log;
  auto client = Client::connect("redis://127.0.0.1:" + std::to_string(net.port()), patient_connects(log));
  {
    auto warm = client.try_acquire("stall", lease_of(10s));
    ASSERT_TRUE(warm.ok()) << warm.status().to_string();
    ASSERT_TRUE(warm->release().ok());
  }
  net.stall();
  ASSERT_FALSE(net.connects_within(300ms)) << "the kernel answered a SYN to a full queue: no stall to test";
  let_the_pool_notice();
  const auto t0 = Clock::now();
  auto r = client.acquire("stall", 500ms, lease_of(10s));
  const auto took = Clock::now() - t0;
  EXPECT_FALSE(r.ok());
  EXPECT_LT(took, 1500ms) << "held for " << std::chrono::duration_cast<milliseconds>(took).count()
                          << " ms: " << r.status().to_string();
  EXPECT_EQ(SyncRedis(server.port()).integer({"EXISTS", "dlock:{stall}"}), 0);
}

// Redlock over 3 masters, the first of them gone: the round is decided on
// the other two within its window, not after the gone master's connect.
// The second master's connections were cut too (its blocking connection must
// be opened again inside the round): the master that answers is opened
// first, so the gone one cannot use up the window before it.
TEST(StalledConnect, ARedlockRoundDecidesWithoutAMasterThatHangsInConnect) {
  std::vector<std::unique_ptr<RedisServer>> servers;
  for (int i = 0; i < 3; ++i) servers.push_back(std::make_unique<RedisServer>());
  TcpFault net(servers[0]->port());
  const std::string url = "redlock://127.0.0.1:" + std::to_string(net.port()) + "," + servers[1]->host_port() + "," +
                          servers[2]->host_port();
  LogSink log;
  auto client = Client::connect(url, patient_connects(log));
  {
    auto warm = client.try_acquire("quorum", lease_of(10s));
    ASSERT_TRUE(warm.ok()) << warm.status().to_string();
    ASSERT_TRUE(warm->release().ok());
  }
  net.stall();
  ASSERT_FALSE(net.connects_within(300ms)) << "the kernel answered a SYN to a full queue: no stall to test";
  EXPECT_GE(SyncRedis(servers[1]->port()).integer({"CLIENT", "KILL", "TYPE", "normal"}), 1);
  let_the_pool_notice();
  for (int round = 0; round < 2; ++round) {
    const auto t0 = Clock::now();
    auto lease = client.try_acquire("quorum", lease_of(10s));
    const auto took = Clock::now() - t0;
    ASSERT_TRUE(lease.ok()) << lease.status().to_string();
    EXPECT_LT(took, 1500ms) << "round " << round << " held for "
                            << std::chrono::duration_cast<milliseconds>(took).count() << " ms";
    for (int i = 1; i < 3; ++i)
      EXPECT_EQ(SyncRedis(servers[static_cast<std::size_t>(i)]->port()).integer({"EXISTS", "dlock:{quorum}"}), 1);
    EXPECT_TRUE(lease->release().ok());
  }
}

}  // namespace
}  // namespace dlock::test

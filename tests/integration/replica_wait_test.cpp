// Failover-safe single master: grants and renewals wait for replica
// acknowledgements (WAIT); too few is a failed grant or a missed renewal.
#include "integration/common.hpp"

namespace dlock::test {
namespace {

class ReplicaWait : public ::testing::Test {
 protected:
  ReplicaWait() : master(master_options()), replica(replica_of(master)) {
    // "online", not just connected: WAIT counts only replicas the master has
    // put online, which after a diskless sync waits for their first ACK.
    EXPECT_TRUE(eventually(
        [&] {
          return master.cli({"INFO", "replication"}).find("state=online") != std::string::npos;
        },
        10s));
    EXPECT_TRUE(eventually(
        [&] {
          return replica.cli({"INFO", "replication"}).find("master_link_status:up") != std::string::npos;
        },
        10s));
    // The first acknowledgement after a full sync can take a replica's ACK
    // period; wait for one here so the tests measure the steady state.
    SyncRedis warm(master.port());
    warm.cmd({"SET", "warm-up", "1"});
    EXPECT_EQ(warm.integer({"WAIT", "1", "5000"}), 1);
  }
  // Without the default 5 s delay before the first full sync.
  static RedisServerOptions master_options() {
    RedisServerOptions o;
    o.extra_args = {"--repl-diskless-sync-delay", "0"};
    return o;
  }
  static RedisServerOptions replica_of(const RedisServer& m) {
    RedisServerOptions o;
    o.extra_args = {"--replicaof", "127.0.0.1", std::to_string(m.port())};
    return o;
  }
  ClientOptions waiting(int replicas, milliseconds timeout = 100ms) {
    ClientOptions o = quiet(log);
    o.wait_replicas = replicas;
    o.wait_timeout = timeout;
    return o;
  }
  static LockOptions fixed(milliseconds lease) {
    LockOptions o;
    o.lease = lease;
    return o;
  }

  RedisServer master;
  RedisServer replica;
  LogSink log;
};

TEST_F(ReplicaWait, GrantIsOnTheReplicaWhenAcquireReturns) {
  Client client = Client::connect(master.url(), waiting(1));
  auto lease = client.try_acquire("w1", fixed(10s)).value();
  // No eventually(): WAIT returned only after the replica had it.
  EXPECT_EQ(SyncRedis(replica.port()).integer({"EXISTS", "dlock:{w1}"}), 1);
  EXPECT_TRUE(lease.release().ok());
}

TEST_F(ReplicaWait, TooFewReplicasIsAFailedGrantAndNothingStays) {
  Client client = Client::connect(master.url(), waiting(2, 50ms));
  auto r = client.try_acquire("w2", fixed(10s));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::unavailable) << r.status().to_string();
  EXPECT_NE(r.status().message().find("not replicated to 2"), std::string::npos) << r.status().message();
  EXPECT_EQ(SyncRedis(master.port()).integer({"EXISTS", "dlock:{w2}"}), 0) << "undone on the master";
}

// Blocking calls in WAIT mode take the fast path: the script and its WAIT
// in one write, on the caller's thread.
TEST_F(ReplicaWait, BlockingCallsWaitAndUndoOnTheCallersThread) {
  Client client = Client::connect(master.url(), waiting(1));
  EXPECT_TRUE(returns_beside_a_blocked_io_thread(client, [&] {
    auto lease = client.try_acquire("fast-w", fixed(10s));
    ASSERT_TRUE(lease.ok()) << lease.status().to_string();
    EXPECT_EQ(SyncRedis(replica.port()).integer({"EXISTS", "dlock:{fast-w}"}), 1);
    EXPECT_TRUE(lease->release().ok());
  }));
  // Too few acknowledgements: undone on the caller's thread, then (an
  // unavailable answer is transient) tried again by the I/O path within
  // error_retry, which undoes its own grant alike.
  Client strict = Client::connect(master.url(), waiting(2, 50ms));
  auto r = strict.try_acquire("fast-w2", fixed(10s));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::unavailable) << r.status().to_string();
  EXPECT_NE(r.status().message().find("it was released"), std::string::npos) << r.status().message();
  EXPECT_EQ(SyncRedis(master.port()).integer({"EXISTS", "dlock:{fast-w2}"}), 0) << "undone on the master";
}

// A master that lost its scripts: the script is sent again whole with its
// WAIT behind it, on both paths, and the grant is still on the replica when
// the call returns.
TEST_F(ReplicaWait, AfterTheMasterLostItsScriptsTheWaitGoesWithTheScriptSentWhole) {
  Client client = Client::connect(master.url(), waiting(1));
  auto warm = client.try_acquire("nos-warm", fixed(10s));  // the fast path's connection knows the scripts
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  ASSERT_TRUE(warm->release().ok());
  SyncRedis m(master.port()), r(replica.port());
  ASSERT_EQ(m.cmd({"SCRIPT", "FLUSH"}), "OK");
  auto fast = client.try_acquire("nos-fast", fixed(10s));
  ASSERT_TRUE(fast.ok()) << fast.status().to_string();
  EXPECT_EQ(r.integer({"EXISTS", "dlock:{nos-fast}"}), 1);
  ASSERT_EQ(m.cmd({"SCRIPT", "FLUSH"}), "OK");
  std::promise<Result<Lease>> got;
  client.async_acquire("nos-io", 0ms, fixed(10s), [&](Result<Lease> l) { got.set_value(std::move(l)); });
  auto io = got.get_future().get();
  ASSERT_TRUE(io.ok()) << io.status().to_string();
  EXPECT_EQ(r.integer({"EXISTS", "dlock:{nos-io}"}), 1);
  const std::string errors = m.cmd({"INFO", "errorstats"});
  EXPECT_NE(errors.find("errorstat_NOSCRIPT:count="), std::string::npos) << errors;
  EXPECT_TRUE(fast->release().ok());
  EXPECT_TRUE(io->release().ok());
}

TEST_F(ReplicaWait, UnacknowledgedRenewalsLoseTheLease) {
  Client client = Client::connect(master.url(), waiting(1, 50ms));
  std::atomic<int> lost{0}, reason{-1};
  LockOptions o = fast_watchdog(1000ms, 300ms);
  o.on_lost = [&](LossReason r) {
    reason = static_cast<int>(r);
    ++lost;
  };
  auto lease = client.try_acquire("w3", o).value();
  std::this_thread::sleep_for(700ms);
  EXPECT_EQ(lost.load(), 0) << "renewed while the replica acknowledges";
  replica.stop();
  ASSERT_TRUE(eventually([&] { return lost.load() == 1; }, 3s));
  EXPECT_EQ(reason.load(), static_cast<int>(LossReason::unreachable));
}

TEST_F(ReplicaWait, RejectedWithRedlock) {
  ClientOptions o = waiting(1);
  auto c = Client::try_connect("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", o);
  EXPECT_EQ(c.code(), Errc::invalid_argument);
  o.wait_replicas = -1;
  EXPECT_EQ(Client::try_connect(master.url(), o).code(), Errc::invalid_argument);
}

// The URL turns WAIT mode on without code; options left at their defaults
// take the URL's values, options set to anything else win.
TEST_F(ReplicaWait, UrlParametersFillInDefaultOptions) {
  {
    Client client = Client::connect(master.url() + "?wait_replicas=2&wait_timeout_ms=50", quiet(log));
    auto r = client.try_acquire("u1", fixed(10s));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), Errc::unavailable) << r.status().to_string();
    EXPECT_NE(r.status().message().find("not replicated to 2"), std::string::npos) << r.status().message();
  }
  {
    Client client = Client::connect(master.url() + "?wait_replicas=1", quiet(log));
    auto lease = client.try_acquire("u2", fixed(10s)).value();
    EXPECT_EQ(SyncRedis(replica.port()).integer({"EXISTS", "dlock:{u2}"}), 1) << "WAITed for the replica";
    EXPECT_TRUE(lease.release().ok());
  }
  {
    // wait_replicas 1 from the options wins over the URL's 2.
    Client client = Client::connect(master.url() + "?wait_replicas=2", waiting(1));
    EXPECT_TRUE(client.try_acquire("u3", fixed(10s)).ok());
  }
  EXPECT_EQ(Client::try_connect(master.url() + "?wait_replicas=-1", quiet(log)).code(), Errc::invalid_argument);
  EXPECT_EQ(Client::try_connect(master.url() + "?wait_timeout_ms=0", quiet(log)).code(), Errc::invalid_argument);
  EXPECT_EQ(Client::try_connect("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?wait_replicas=1", quiet(log)).code(),
            Errc::invalid_argument);
}

// The price: one more round trip per grant (and renewal).
TEST_F(ReplicaWait, CostPerAcquireAndRelease) {
  auto run = [&](int replicas) {
    Client client = Client::connect(master.url(), waiting(replicas));
    constexpr int kOps = 200;
    const auto t0 = Clock::now();
    for (int i = 0; i < kOps; ++i) {
      auto lease = client.try_acquire("cost", fixed(5s)).value();
      EXPECT_TRUE(lease.release().ok());
    }
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count() / kOps;
  };
  const auto plain = run(0);
  const auto waited = run(1);
  measure("acquire_release_us_no_wait", plain, "us");
  measure("acquire_release_us_wait_1_replica", waited, "us");
  EXPECT_GT(waited, 0);
}

}  // namespace
}  // namespace dlock::test

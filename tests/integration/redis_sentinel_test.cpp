// Redis Sentinel (redis-sentinel://) against a real master, replica and three
// sentinels: the client finds the master through the sentinels, follows a
// failover, and fences keep growing across it.
#include "support/redis_sentinel.hpp"

#include <future>

#include "integration/common.hpp"
#include "support/sync_redis.hpp"

namespace dlock::test {
namespace {

std::string lock_key(const std::string& name) { return "dlock:{" + name + "}"; }

LockOptions lease_of(milliseconds lease) {
  LockOptions o;
  o.lease = lease;
  return o;
}

// An acquire and release of `name` on the caller's thread (while the I/O
// thread is held), the grant found on data node `node`.
void fast_pair_on(Client& client, RedisSentinelSet& set, int node, const std::string& name) {
  EXPECT_TRUE(returns_beside_a_blocked_io_thread(
      client,
      [&] {
        auto lease = client.try_acquire(name, lease_of(10s));
        ASSERT_TRUE(lease.ok()) << lease.status().to_string();
        EXPECT_EQ(SyncRedis(set.data(node).port()).integer({"EXISTS", lock_key(name)}), 1);
        EXPECT_TRUE(lease->release().ok());
      }))
      << "data node " << node;
}

// A failover, followed: the client finds the new master (a blocking call
// may meet the demoted one first, READONLY, and then goes through the I/O
// thread), and then takes the fast path to it.
void failover_and_follow(Client& client, RedisSentinelSet& set, const std::string& name) {
  set.failover();
  ASSERT_TRUE(eventually(
      [&] {
        auto l = client.try_acquire(name, lease_of(10s));
        return l.ok() && l->release().ok();
      },
      20s));
  fast_pair_on(client, set, set.master_index(), name);
}

class RedisSentinelTest : public ::testing::Test {
 protected:
  Client connect() { return Client::connect(set.url(), quiet(log)); }
  RedisSentinelSet set;
  LogSink log;
};

TEST_F(RedisSentinelTest, LocksOnTheMasterTheSentinelsName) {
  Client client = connect();
  // Fences per name, from the server's clock: a failover cannot repeat one.
  // The clock is read before the grant (read after it, a second may have
  // ticked in between).
  const std::string time = set.data(0).cli({"TIME"});
  auto lease = client.try_acquire("job", lease_of(10s));
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  EXPECT_EQ(SyncRedis(set.data(0).port()).integer({"EXISTS", lock_key("job")}), 1);
  EXPECT_GE(lease->fence(), std::stoull(time.substr(0, time.find('\n'))) * 1000000ULL);
  EXPECT_EQ(connect().try_acquire("job").code(), Errc::busy);
  EXPECT_TRUE(lease->release().ok());
  EXPECT_EQ(client.stats().backend, "redis");
}

// Blocking calls take the fast path to the master the sentinels name, on
// the caller's thread; after a failover, to the new master.
TEST_F(RedisSentinelTest, BlockingCallsRunOnTheCallersThreadBeforeAndAfterAFailover) {
  Client client = connect();
  fast_pair_on(client, set, 0, "fast");
  failover_and_follow(client, set, "fast");
}

TEST_F(RedisSentinelTest, ADownSentinelIsSkipped) {
  set.sentinel(0).stop();
  Client client = connect();
  EXPECT_TRUE(client.try_acquire("skip").ok());
}

TEST_F(RedisSentinelTest, AnUnknownMasterNameIsRefusedClearly) {
  std::string url = set.url();
  url.replace(url.rfind('/') + 1, std::string::npos, "nosuch");
  auto r = Client::try_connect(url, quiet(log));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::invalid_argument) << r.status().to_string();
  EXPECT_NE(r.status().message().find("no sentinel knows a master named 'nosuch'"), std::string::npos)
      << r.status().message();
}

// Sentinels that let in only an ACL user of their own: the URL's
// sentinel_user and sentinel_password are theirs (the userinfo stays the
// master's); without them, or with a wrong password, connect() says
// authentication failed, never that the master is unknown.
TEST_F(RedisSentinelTest, SentinelsThatRequireAUserAreAskedWithIt) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(set.sentinel(i).cli({"ACL", "SETUSER", "sentry", "on", ">sentry pw", "+@all"}), "OK");
    ASSERT_EQ(set.sentinel(i).cli({"ACL", "SETUSER", "default", "off"}), "OK");
  }
  auto without = Client::try_connect(set.url(), quiet(log));
  ASSERT_FALSE(without.ok());
  EXPECT_EQ(without.code(), Errc::auth_failed) << without.status().to_string();
  auto wrong = Client::try_connect(set.url() + "?sentinel_user=sentry&sentinel_password=nope", quiet(log));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.code(), Errc::auth_failed) << wrong.status().to_string();
  EXPECT_EQ(wrong.status().message().find("nope"), std::string::npos) << "a password in an error message";
  auto with = Client::try_connect(set.url() + "?sentinel_user=sentry&sentinel_password=sentry%20pw", quiet(log));
  ASSERT_TRUE(with.ok()) << with.status().to_string();
  auto lease = with->try_acquire("guarded", lease_of(10s));
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  EXPECT_EQ(SyncRedis(set.data(0).port()).integer({"EXISTS", lock_key("guarded")}), 1);
  EXPECT_TRUE(lease->release().ok());
  for (int i = 0; i < 3; ++i) set.sentinel(i).cli({"ACL", "SETUSER", "default", "on"});
}

// connect() ends by twice the connect timeout whatever the sentinels say:
// none answering, or one naming a master nobody can reach (the master and
// its only replica are gone, so no failover comes).
TEST_F(RedisSentinelTest, ConnectEndsInTimeWhenNoMasterCanBeReached) {
  ClientOptions o = quiet(log);
  o.connect_timeout = 500ms;
  set.data(0).kill9();
  set.data(1).kill9();
  auto t0 = Clock::now();
  auto r = Client::try_connect(set.url(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::unavailable) << r.status().to_string();
  EXPECT_LT(ms_since(t0), 3000);
  for (int i = 0; i < 3; ++i) set.sentinel(i).stop();
  t0 = Clock::now();
  r = Client::try_connect(set.url(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::unavailable) << r.status().to_string();
  EXPECT_NE(r.status().message().find("no sentinel told the master"), std::string::npos) << r.status().message();
  EXPECT_LT(ms_since(t0), 3000);
}

// A graceful failover while a lock is held: the replica had the grant; the
// client follows +switch-master, renews and releases on the new master,
// and a waiter there is woken by the release. (Renewals sent between the
// promotion and +switch-master land on the old master and are lost with
// it: a lease shorter than that window, about a second here, may be lost.)
TEST_F(RedisSentinelTest, FailoverWhileHeldKeepsTheHoldAndTheWakeUps) {
  Client client = connect();
  Client waiter = connect();
  LockOptions o = fast_watchdog(5000ms, 1000ms);
  std::atomic<int> lost{0};
  o.on_lost = [&](LossReason) { ++lost; };
  auto lease = client.try_acquire("held", o);
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  ASSERT_TRUE(eventually([&] { return SyncRedis(set.data(1).port()).integer({"EXISTS", lock_key("held")}) == 1; }, 5s));
  set.failover();
  std::this_thread::sleep_for(1500ms);  // renewals now go to node 1
  EXPECT_EQ(lost.load(), 0);
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(waiter.try_acquire("held").code(), Errc::busy);
  auto got = std::async(std::launch::async, [&] { return waiter.acquire("held", 10s, lease_of(30s)); });
  std::this_thread::sleep_for(300ms);
  const std::uint64_t fence = lease->fence();
  ASSERT_TRUE(lease->release().ok());
  auto r = got.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_GT(r->fence(), fence);
  EXPECT_EQ(SyncRedis(set.data(1).port()).integer({"EXISTS", lock_key("held")}), 1) << "granted on the new master";
}

// The master is killed: the sentinels promote the replica (which had the
// grant), and a waiter proceeds there once the fixed lease ends.
TEST_F(RedisSentinelTest, AKilledMasterIsReplacedAndWaitersProceed) {
  Client holder = connect();
  Client waiter = connect();
  auto lease = holder.try_acquire("killed", lease_of(3s));
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  ASSERT_TRUE(eventually(
      [&] {
        return SyncRedis(set.data(1).port()).integer({"EXISTS", lock_key("killed")}) == 1;
      },
      5s));
  const std::uint64_t fence = lease->fence();
  LockOptions patient = lease_of(3s);
  patient.error_retry = 20s;  // the failover takes down-after-milliseconds and an election
  auto got = std::async(std::launch::async, [&] { return waiter.acquire("killed", 30s, patient); });
  set.data(0).kill9();
  auto r = got.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_GT(r->fence(), fence);
  set.wait_master(1);
}

// The failover the README warns of: a grant the replica never received is
// lost with the master, and a second client is granted the lock while the
// first still holds its lease. Fencing is what protects the resource then:
// the promoted replica's counter missed the first fence's increment, and
// the clock floor still gives the second grant a larger fence.
TEST_F(RedisSentinelTest, AGrantLostInAFailoverStillLeavesTheNextFenceLarger) {
  Client first = connect();
  Client second = connect();
  ASSERT_TRUE(first.try_acquire("lost", lease_of(30s)).value().release().ok());  // the counter exists
  ASSERT_TRUE(eventually([&] { return SyncRedis(set.data(1).port()).integer({"EXISTS", "dlock:{lost}:f"}) == 1; }, 5s));
  // The replica hears nothing more: stopped, and its link cut by the master
  // (bytes already sent would wait in its socket and arrive on resume).
  set.data(1).pause();
  ASSERT_EQ(set.data(0).cli({"CLIENT", "KILL", "TYPE", "replica"}), "1");
  auto stale = first.try_acquire("lost", lease_of(30s));
  ASSERT_TRUE(stale.ok()) << stale.status().to_string();
  set.data(0).kill9();  // the grant dies with the master
  set.data(1).resume();
  LockOptions patient = lease_of(30s);
  patient.error_retry = 25s;
  const auto t0 = Clock::now();
  auto fresh = second.acquire("lost", 40s, patient);
  ASSERT_TRUE(fresh.ok()) << fresh.status().to_string();
  EXPECT_LT(ms_since(t0), 20000) << "granted before the first lease could end: the first grant was lost";
  EXPECT_TRUE(stale->held()) << "the first holder's lease has not run out: two holders, as documented";
  EXPECT_GT(fresh->fence(), stale->fence()) << "a write fenced with the stale grant is rejected";
  EXPECT_EQ(set.master_index(), 1);
}

// redis-sentinel+tls://: the sentinels asked over TLS (certificates
// verified), and the master they name reached over TLS on both paths:
// blocking calls on the caller's thread, a waiter woken by the release, and
// a failover followed to the promoted replica's TLS port.
TEST(RedisSentinelTls, LocksWakesAndFollowsAFailoverOverTls) {
  RedisSentinelSet set(true);
  LogSink log;
  Client client = Client::connect(set.url(), quiet(log));
  Client waiter = Client::connect(set.url(), quiet(log));
  fast_pair_on(client, set, 0, "tls");
  // A waiter under a 30 s lease, woken by the release's message (over TLS
  // from the master the sentinels named), not by the lease's end.
  auto held = client.try_acquire("woken", lease_of(30s));
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  auto got = std::async(std::launch::async, [&] { return waiter.acquire("woken", 10s, lease_of(10s)); });
  std::this_thread::sleep_for(300ms);
  const auto released = std::chrono::steady_clock::now();
  ASSERT_TRUE(held->release().ok());
  auto w = got.get();
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - released, 5s);
  EXPECT_GE(waiter.stats().wakeups, 1u);
  EXPECT_TRUE(w->release().ok());
  failover_and_follow(client, set, "tls");
}

}  // namespace
}  // namespace dlock::test

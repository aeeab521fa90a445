// Redis Cluster (redis-cluster://) against a real cluster of 3 masters with
// a replica each: every lock command goes to its slot's master, redirects
// are followed, fences grow per name, and holds survive slot migrations and
// failovers. One cluster serves the suite; the tests that break it (a
// killed master, a cluster down) start their own.
#include "support/redis_cluster.hpp"

#include <future>
#include <set>

#include "integration/common.hpp"
#include "redis/cluster_map.hpp"
#include "support/sync_redis.hpp"

namespace dlock::test {
namespace {

std::string lock_key(const std::string& name) { return "dlock:{" + name + "}"; }
int slot_of(const std::string& name) { return redis::key_slot(lock_key(name)); }
LockOptions lease_of(milliseconds lease) {
  LockOptions o;
  o.lease = lease;
  return o;
}
std::string channel_of(const std::string& name) { return lock_key(name) + ":wake"; }

// How many clients node `i` counts on `name`'s channel: `kind` NUMSUB
// (classic) or SHARDNUMSUB.
// The name's channels with a subscriber on node i ("NUMSUB": classic,
// "SHARDNUMSUB": sharded): its own (observers, a line's waiters) and each
// waiting client's (channel_of + ":<client id>").
int subscribers(const RedisCluster& c, int i, const char* kind, const std::string& name) {
  const std::string r =
      c.cli(i, {"PUBSUB", std::string(kind) == "NUMSUB" ? "CHANNELS" : "SHARDCHANNELS", channel_of(name) + "*"});
  return static_cast<int>(reply_lines(r).size());
}

class RedisClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new RedisCluster(3, 1); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { cluster_->wait_ok(); }

  Client connect() { return Client::connect(cluster_->url(), quiet(log)); }
  // A name whose slot node `master` serves now, fresh for this test.
  std::string name_on(int master, const std::string& base) {
    for (int i = 0;; ++i) {
      std::string n = base + std::to_string(i);
      if (cluster_->master_of_slot(slot_of(n)) == master) return n;
    }
  }

  static RedisCluster* cluster_;
  LogSink log;
};
RedisCluster* RedisClusterTest::cluster_ = nullptr;

TEST_F(RedisClusterTest, LocksOnEveryMasterLiveInTheirSlotsMaster) {
  Client client = connect();
  std::vector<Lease> held;
  std::set<int> masters;
  for (int i = 0; i < 30; ++i) {
    const std::string name = "spread" + std::to_string(i);
    auto lease = client.try_acquire(name, lease_of(30s));
    ASSERT_TRUE(lease.ok()) << name << ": " << lease.status().to_string();
    const int m = cluster_->master_of_slot(slot_of(name));
    masters.insert(m);
    // The hash and its fence counter are on that master, under one tag.
    EXPECT_EQ(cluster_->cli(m, {"EXISTS", lock_key(name)}), "1") << name;
    EXPECT_EQ(cluster_->cli(m, {"EXISTS", lock_key(name) + ":f"}), "1") << name;
    held.push_back(std::move(*lease));
  }
  EXPECT_EQ(masters.size(), 3u) << "30 names should reach all three masters";
  Client other = connect();
  for (auto& lease : held) EXPECT_EQ(other.try_acquire(lease.name()).code(), Errc::busy) << lease.name();
  auto listed = other.list("spread");
  ASSERT_TRUE(listed.ok()) << listed.status().to_string();
  EXPECT_EQ(listed->size(), held.size()) << "list() scans every master";
  for (auto& lease : held) EXPECT_TRUE(lease.release().ok());
  for (int i = 0; i < 30; ++i)
    EXPECT_TRUE(other.try_acquire("spread" + std::to_string(i)).ok()) << "released on its master";
}

// The per-name counter starts at the server's clock in microseconds and
// only grows; inspect reads it.
TEST_F(RedisClusterTest, FencesGrowPerNameFromTheServersClock) {
  Client client = connect();
  const std::string name = "fence-clock";
  const int m = cluster_->master_of_slot(slot_of(name));
  const auto lines = cluster_->cli(m, {"TIME"});
  const unsigned long long now_us = std::stoull(lines.substr(0, lines.find('\n'))) * 1000000ULL;
  std::uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    auto lease = client.try_acquire(name, lease_of(10s));
    ASSERT_TRUE(lease.ok()) << lease.status().to_string();
    EXPECT_GT(lease->fence(), last);
    EXPECT_GE(lease->fence(), now_us);
    last = lease->fence();
    auto info = client.inspect(name);
    ASSERT_TRUE(info.ok()) << info.status().to_string();
    EXPECT_EQ(info->fence, last);
    EXPECT_EQ(info->last_fence, last);
    ASSERT_TRUE(lease->release().ok());
  }
  // The counter expires after a day, not with the lock.
  const long long ttl = std::stoll(cluster_->cli(m, {"PTTL", lock_key(name) + ":f"}));
  EXPECT_GT(ttl, 23LL * 3600 * 1000);
  // Gone (expired, or lost in a failover): the next fence is still larger.
  cluster_->cli(m, {"DEL", lock_key(name) + ":f"});
  auto lease = client.try_acquire(name, lease_of(10s));
  ASSERT_TRUE(lease.ok());
  EXPECT_GT(lease->fence(), last);
}

// The name's counter holding something else is refused, as the prefix's
// counter is (no half-made lock); a counter ahead of the clock keeps
// counting from itself, and keeps its day.
TEST_F(RedisClusterTest, TheNamesFenceCounterIsCheckedAndKept) {
  Client client = connect();
  const std::string name = "fence-foreign";
  const int m = cluster_->master_of_slot(slot_of(name));
  const std::string counter = lock_key(name) + ":f";
  cluster_->cli(m, {"SET", counter, "not-a-number"});
  EXPECT_EQ(client.try_acquire(name).code(), Errc::wrong_type);
  EXPECT_EQ(cluster_->cli(m, {"EXISTS", lock_key(name)}), "0") << "no half-made lock";
  cluster_->cli(m, {"DEL", counter});
  cluster_->cli(m, {"HSET", counter, "x", "1"});
  EXPECT_EQ(client.try_acquire(name).code(), Errc::wrong_type);
  cluster_->cli(m, {"DEL", counter});
  // Far ahead of the clock (written by hand, or by a node whose clock ran
  // fast): the next fence is one more.
  cluster_->cli(m, {"SET", counter, "8000000000000000"});
  auto lease = client.try_acquire(name, lease_of(10s));
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  EXPECT_EQ(lease->fence(), 8000000000000001u);
  EXPECT_GT(std::stoll(cluster_->cli(m, {"PTTL", counter})), 23LL * 3600 * 1000);
  ASSERT_TRUE(lease->release().ok());
  cluster_->cli(m, {"DEL", counter});
}

// The watchdog renews locks on three masters in one tick: each master
// gets its own script call, so no CROSSSLOT failure loses the batch.
TEST_F(RedisClusterTest, WatchdogRenewsLocksOnEveryMaster) {
  Client client = connect();
  std::atomic<int> lost{0};
  std::vector<Lease> held;
  for (int i = 0; i < 12; ++i) {
    LockOptions o = fast_watchdog(600ms, 150ms);
    o.on_lost = [&](LossReason) { ++lost; };
    auto lease = client.try_acquire("renewed" + std::to_string(i), o);
    ASSERT_TRUE(lease.ok()) << lease.status().to_string();
    held.push_back(std::move(*lease));
  }
  std::this_thread::sleep_for(2s);  // more than three leases
  EXPECT_EQ(lost.load(), 0);
  Client other = connect();
  for (auto& lease : held) {
    EXPECT_TRUE(lease.held());
    EXPECT_EQ(other.try_acquire(lease.name()).code(), Errc::busy) << lease.name();
  }
  EXPECT_EQ(client.stats().renewal_failures, 0u);
}

// A release on each master wakes a waiter of another client through
// sharded pub/sub (Redis 7): the waiter subscribes at its lock's own master
// (SSUBSCRIBE), where the release's SPUBLISH stays; no node counts a
// classic subscriber, and inspect counts the waiter. The holder's lease is
// 30 s: a grant within the waiter's 10 s is the message's doing.
TEST_F(RedisClusterTest, WaitersSubscribeAtTheirLocksOwnMaster) {
  Client holder = connect();
  Client waiter = connect();
  for (int m = 0; m < 3; ++m) {
    const std::string name = name_on(m, "shard" + std::to_string(m) + "-");
    auto lease = holder.try_acquire(name, lease_of(30s));
    ASSERT_TRUE(lease.ok()) << lease.status().to_string();
    auto got = std::async(std::launch::async, [&] { return waiter.acquire(name, 10s, lease_of(30s)); });
    EXPECT_TRUE(eventually([&] { return subscribers(*cluster_, m, "SHARDNUMSUB", name) == 1; }, 5s))
        << "master " << m << " never counted the waiter";
    for (int other = 0; other < 3; ++other) {
      EXPECT_EQ(subscribers(*cluster_, other, "NUMSUB", name), 0) << "a classic subscriber on master " << other;
      if (other != m) {
        EXPECT_EQ(subscribers(*cluster_, other, "SHARDNUMSUB", name), 0) << "master " << other;
      }
    }
    auto seen = holder.inspect(name);
    ASSERT_TRUE(seen.ok()) << seen.status().to_string();
    EXPECT_EQ(seen->waiters, 1u);
    const std::uint64_t fence = lease->fence();
    const auto T1 = Clock::now();
    ASSERT_TRUE(lease->release().ok());
    auto r = got.get();
    std::cout << "woken " << std::chrono::duration_cast<milliseconds>(Clock::now() - T1).count() << std::endl;
    ASSERT_TRUE(r.ok()) << "master " << m << ": " << r.status().to_string();
    EXPECT_GT(r->fence(), fence);
    EXPECT_TRUE(r->release().ok());
  }
}

// A user allowed the lock commands but not SSUBSCRIBE: its waiter is told
// at once that it cannot subscribe and polls (10 ms, doubling to 500 ms),
// rather than failing or sleeping to its holder's lease for a message that
// cannot come.
TEST_F(RedisClusterTest, AUserWithoutSsubscribePollsForTheRelease) {
  for (int i = 0; i < cluster_->size(); ++i)
    ASSERT_EQ(cluster_->cli(i, {"ACL", "SETUSER", "nosub", "on", ">nosub-pw", "~*", "&*", "+@all", "-ssubscribe"}),
              "OK");
  std::string url = cluster_->url();
  url.insert(url.find("://") + 3, "nosub:nosub-pw@");
  Client holder = connect();
  Client waiter = Client::connect(url, quiet(log));
  const std::string name = name_on(1, "nosub-");
  auto lease = holder.try_acquire(name, lease_of(30s));
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  const auto t0 = Clock::now();
  auto got = std::async(std::launch::async, [&] { return waiter.acquire(name, 10s, lease_of(10s)); });
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(subscribers(*cluster_, 1, "SHARDNUMSUB", name), 0) << "subscribed without the right to";
  ASSERT_TRUE(lease->release().ok());
  auto r = got.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_LT(Clock::now() - t0, 2s) << "it polled, rather than waiting for the holder's 30 s lease";
  EXPECT_TRUE(r->release().ok());
  for (int i = 0; i < cluster_->size(); ++i) cluster_->cli(i, {"ACL", "DELUSER", "nosub"});
}

// ?pubsub=classic: every client subscribes at slot 0's master, where
// PUBLISH, which reaches every node, finds it.
TEST_F(RedisClusterTest, ClassicPubSubIsKeptWhenAsked) {
  Client waiter = Client::connect(cluster_->url() + "?pubsub=classic", quiet(log));
  Client classic_holder = Client::connect(cluster_->url() + "?pubsub=classic", quiet(log));
  const int at = cluster_->master_of_slot(0);
  const std::string name = name_on((at + 1) % 3, "classic-");
  auto lease = classic_holder.try_acquire(name, lease_of(30s));
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  auto got = std::async(std::launch::async, [&] { return waiter.acquire(name, 10s, lease_of(30s)); });
  EXPECT_TRUE(eventually([&] { return subscribers(*cluster_, at, "NUMSUB", name) == 1; }, 5s));
  EXPECT_EQ(subscribers(*cluster_, (at + 1) % 3, "SHARDNUMSUB", name), 0);
  ASSERT_TRUE(lease->release().ok());
  auto r = got.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->release().ok());
}

// Processes taking turns on one lock, as the benchmark's W3: each waiter's
// subscription is dropped when it is granted and made again when it next
// waits, often while the UNSUBSCRIBE is still in flight. That SUBSCRIBE
// must still be sent (it was not: the waiter then waited for a
// confirmation that never came, forever). The leases outlast the waits,
// so a missed wake-up fails the test. In both pub/sub modes.
TEST_F(RedisClusterTest, ClientsTakingTurnsAreEachWokenInBothPubSubModes) {
  for (const char* mode : {"classic", "sharded"}) {
    std::vector<Client> clients;
    for (int i = 0; i < 6; ++i) clients.push_back(Client::connect(cluster_->url() + "?pubsub=" + mode, quiet(log)));
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (auto& c : clients)
      threads.emplace_back([&, &c = c] {
        for (int t = 0; t < 60 && failures.load() == 0; ++t) {
          auto lease = c.acquire(std::string("turns-") + mode, 15s, lease_of(30s));
          if (!lease.ok()) {
            ++failures;
            ADD_FAILURE() << mode << ": " << lease.status().to_string();
            return;
          }
          (void)c.inspect("elsewhere");  // a round trip inside, as W3's counter
          if (!lease->release().ok()) ++failures;
        }
      });
    for (auto& t : threads) t.join();
    EXPECT_EQ(failures.load(), 0) << mode;
  }
}

// A slot moves to another master while its lock is held and a waiter
// waits: the holder's renewal and release follow MOVED, the fence counter
// moves with the slot, and the waiter is woken. The source node drops the
// waiter's sharded subscription with the slot: it subscribes again at the
// new master.
TEST_F(RedisClusterTest, SlotMigratedWhileHeldAndAwaited) {
  Client holder = connect();
  Client waiter = connect();
  const std::string name = name_on(0, "migrate-");
  const int slot = slot_of(name);
  LockOptions o = fast_watchdog(800ms, 200ms);
  std::atomic<int> lost{0};
  o.on_lost = [&](LossReason) { ++lost; };
  auto lease = holder.try_acquire(name, o);
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  auto got = std::async(std::launch::async, [&] { return waiter.acquire(name, 15s, lease_of(30s)); });
  std::this_thread::sleep_for(200ms);
  cluster_->migrate_slot(slot, 1);
  EXPECT_EQ(cluster_->master_of_slot(slot), 1);
  std::this_thread::sleep_for(1500ms);  // renewals now land on the new master
  EXPECT_TRUE(eventually([&] { return subscribers(*cluster_, 1, "SHARDNUMSUB", name) == 1; }, 5s))
      << "the waiter did not subscribe again where the slot went";
  EXPECT_EQ(subscribers(*cluster_, 0, "SHARDNUMSUB", name), 0);
  EXPECT_EQ(lost.load(), 0);
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(cluster_->cli(1, {"EXISTS", lock_key(name)}), "1");
  const std::uint64_t fence = lease->fence();
  ASSERT_TRUE(lease->release().ok());
  auto r = got.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_GT(r->fence(), fence) << "the counter moved with the slot";
  ASSERT_TRUE(r->release().ok());
  cluster_->migrate_slot(slot, 0);  // back, for the other tests
}

// Blocking calls take the fast path in a cluster too: they run on the
// caller's thread, to the slot's master, without the I/O thread.
TEST_F(RedisClusterTest, BlockingCallsRunOnTheCallersThread) {
  Client client = connect();
  for (int master = 0; master < 3; ++master) {
    const std::string name = name_on(master, "fast-");
    EXPECT_TRUE(returns_beside_a_blocked_io_thread(client,
                                                   [&] {
                                                     auto lease = client.try_acquire(name, lease_of(10s));
                                                     ASSERT_TRUE(lease.ok()) << lease.status().to_string();
                                                     EXPECT_EQ(cluster_->cli(master, {"EXISTS", lock_key(name)}), "1");
                                                     EXPECT_TRUE(lease->release().ok());
                                                   }))
        << "master " << master;
    EXPECT_EQ(cluster_->cli(master, {"EXISTS", lock_key(name)}), "0");
  }
}

// A blocking call to a slot that moved since the client learnt the map is
// answered MOVED; the I/O path then follows it, and the grant is made on
// the slot's new master.
TEST_F(RedisClusterTest, ABlockingCallToAMovedSlotFollowsIt) {
  Client client = connect();
  const std::string name = name_on(0, "moved-");
  const int slot = slot_of(name);
  auto warm = client.try_acquire(name, lease_of(10s));  // a blocking connection to master 0
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  const std::uint64_t warm_fence = warm->fence();
  ASSERT_TRUE(warm->release().ok());
  cluster_->migrate_slot(slot, 1);
  auto lease = client.try_acquire(name, lease_of(10s));
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  EXPECT_EQ(cluster_->cli(1, {"EXISTS", lock_key(name)}), "1");
  EXPECT_GT(lease->fence(), warm_fence) << "the counter moved with the slot";
  ASSERT_TRUE(lease->release().ok());
  EXPECT_EQ(cluster_->cli(1, {"EXISTS", lock_key(name)}), "0");
  // The map caught up: the next blocking call goes straight to master 1.
  EXPECT_TRUE(returns_beside_a_blocked_io_thread(client, [&] {
    auto again = client.try_acquire(name, lease_of(10s));
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    EXPECT_TRUE(again->release().ok());
  }));
  cluster_->migrate_slot(slot, 0);  // back, for the other tests
}

// Mid-migration, the keys moved and the source still MIGRATING: the source
// answers ASK, the target TRYAGAIN for a script whose keys are not all there
// yet. A try is unavailable; a waiting acquire is granted on the target once
// the move ends.
TEST_F(RedisClusterTest, AMigratingSlotIsServedWhenTheMoveEnds) {
  Client client = connect();
  const std::string name = name_on(0, "ask-");
  const int slot = slot_of(name);
  cluster_->migrate_slot(slot, 2, 2);  // stop with the slot MIGRATING, keys moved (none)
  auto r = client.try_acquire(name, lease_of(10s));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::unavailable) << r.status().to_string();
  EXPECT_EQ(r.status().backend_code(), "TRYAGAIN") << r.status().to_string();
  auto got = std::async(std::launch::async, [&] { return client.acquire(name, 10s, lease_of(10s)); });
  std::this_thread::sleep_for(500ms);
  cluster_->migrate_slot(slot, 2);  // SETSLOT NODE everywhere
  auto lease = got.get();
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  EXPECT_EQ(cluster_->cli(2, {"EXISTS", lock_key(name)}), "1");
  EXPECT_TRUE(lease->release().ok());
  EXPECT_EQ(cluster_->cli(2, {"EXISTS", lock_key(name)}), "0");
  cluster_->migrate_slot(slot, 0);
}

// A graceful failover of the master that holds a lock: the replica had the
// grant, renewals and the release go to the new master.
TEST_F(RedisClusterTest, FailoverWhileHeldKeepsTheHold) {
  Client client = connect();
  const std::string name = name_on(1, "failover-");
  const int slot = slot_of(name);
  LockOptions o = fast_watchdog(1000ms, 250ms);
  std::atomic<int> lost{0};
  o.on_lost = [&](LossReason) { ++lost; };
  auto lease = client.try_acquire(name, o);
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  const int replica = 4;  // node 1's replica
  ASSERT_FALSE(cluster_->is_master(replica));
  cluster_->failover(replica);
  EXPECT_EQ(cluster_->master_of_slot(slot), replica);
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(lost.load(), 0);
  Client other = connect();
  EXPECT_EQ(other.try_acquire(name).code(), Errc::busy);
  const std::uint64_t fence = lease->fence();
  ASSERT_TRUE(lease->release().ok());
  auto next = other.try_acquire(name, lease_of(10s));
  ASSERT_TRUE(next.ok()) << next.status().to_string();
  EXPECT_GT(next->fence(), fence);
  ASSERT_TRUE(next->release().ok());
  cluster_->failover(1);  // back
}

TEST_F(RedisClusterTest, AServerThatIsNoClusterIsRefusedClearly) {
  RedisServer plain;
  auto r = Client::try_connect("redis-cluster://" + plain.host_port(), quiet(log));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::invalid_argument);
  EXPECT_NE(r.status().message().find("not a cluster node"), std::string::npos) << r.status().message();
}

// redis:// to a node of a cluster: its one fence counter is in another
// slot than the lock (CROSSSLOT), or the lock's slot is elsewhere (MOVED).
// Either way the error names the cluster scheme.
TEST_F(RedisClusterTest, PlainUrlToAClusterNodeNamesTheClusterScheme) {
  Client client = Client::connect(cluster_->node(0).url(), quiet(log));
  for (int m : {0, 2}) {
    auto r = client.try_acquire(name_on(m, "plain-"));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("redis-cluster://"), std::string::npos) << r.status().message();
  }
}

// key_prefix with a hash tag ("{dlock}:", a common cluster practice) under
// the single-key layouts: every acquire failed CROSSSLOT, the side keys
// hashed by the prefix's tag, not into the name's slot.
TEST_F(RedisClusterTest, AHashTaggedKeyPrefixWorksForTheSingleKeyLayouts) {
  ClientOptions o = quiet(log);
  o.key_prefix = "{dlock}:";
  for (const char* layout : {"plain", "redisson", "dlock"}) {
    Client a = Client::connect(cluster_->url() + "?layout=" + layout, o);
    Client b = Client::connect(cluster_->url() + "?layout=" + layout, o);
    for (int m : {0, 1, 2}) {
      const std::string name = name_on(m, std::string("tagged-") + layout + "-");
      auto held = a.try_acquire(name);
      ASSERT_TRUE(held.ok()) << layout << " " << name << ": " << held.status().to_string();
      EXPECT_EQ(b.try_acquire(name).code(), Errc::busy) << layout << " " << name;
      auto waiting = std::async(std::launch::async, [&] { return b.acquire(name, 10s); });
      std::this_thread::sleep_for(50ms);
      const std::uint64_t fence = held->fence();
      ASSERT_TRUE(held->release().ok()) << layout;
      auto next = waiting.get();
      ASSERT_TRUE(next.ok()) << layout << ": " << next.status().to_string();
      EXPECT_GT(next->fence(), fence) << layout;
    }
  }
}

// A master and its replica gone: the cluster is down for every slot
// (cluster-require-full-coverage). A try is unavailable; a waiting acquire
// succeeds once the nodes are back, within its wait.
TEST(RedisClusterDown, UnavailableThenServedAgain) {
  LogSink log;
  RedisCluster cluster(3, 1);
  Client client = Client::connect(cluster.url(), quiet(log));
  ASSERT_TRUE(client.try_acquire("warm").ok());
  cluster.node(2).kill9();
  cluster.node(5).kill9();
  ASSERT_TRUE(eventually(
      [&] {
        return cluster.cli(0, {"CLUSTER", "INFO"}).find("cluster_state:fail") != std::string::npos;
      },
      10s));
  auto r = client.try_acquire("down");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::unavailable) << r.status().to_string();
  auto later = std::async(std::launch::async, [&] { return client.acquire("down", 30s); });
  std::this_thread::sleep_for(500ms);
  cluster.node(2).start();
  cluster.node(5).start();
  auto got = later.get();
  EXPECT_TRUE(got.ok()) << got.status().to_string();
}

// redis-cluster+tls://: every node reached over TLS (the certificate
// verified; the bus and replication over TLS too): blocking calls on the
// caller's thread to each slot's master, and a waiter woken there through
// sharded pub/sub, its subscription over TLS as well.
TEST(RedisClusterTls, LocksAndWakeUpsOnEveryMasterOverTls) {
  RedisCluster cluster(3, 1, {}, true);
  LogSink log;
  Client holder = Client::connect(cluster.url(), quiet(log));
  Client waiter = Client::connect(cluster.url(), quiet(log));
  std::vector<std::string> names(3);
  for (int i = 0; names[0].empty() || names[1].empty() || names[2].empty(); ++i)
    names[cluster.master_of_slot(slot_of("tls-" + std::to_string(i)))] = "tls-" + std::to_string(i);
  std::vector<Lease> leases;
  EXPECT_TRUE(returns_beside_a_blocked_io_thread(holder, [&] {
    for (const auto& name : names) {
      auto r = holder.try_acquire(name, lease_of(30s));
      ASSERT_TRUE(r.ok()) << name << ": " << r.status().to_string();
      leases.push_back(std::move(*r));
    }
  }));
  ASSERT_EQ(leases.size(), 3u);
  for (int m = 0; m < 3; ++m) {
    EXPECT_EQ(cluster.cli(m, {"EXISTS", lock_key(names[m])}), "1") << "master " << m;
    auto got = std::async(std::launch::async, [&] { return waiter.acquire(names[m], 10s, lease_of(30s)); });
    EXPECT_TRUE(eventually([&] { return subscribers(cluster, m, "SHARDNUMSUB", names[m]) == 1; }, 5s))
        << "master " << m;
    const std::uint64_t fence = leases[m].fence();
    ASSERT_TRUE(leases[m].release().ok());
    auto r = got.get();
    ASSERT_TRUE(r.ok()) << "master " << m << ": " << r.status().to_string();
    EXPECT_GT(r->fence(), fence);
    EXPECT_TRUE(r->release().ok());
    EXPECT_EQ(cluster.cli(m, {"EXISTS", lock_key(names[m])}), "0");
  }
  // A failover over the TLS bus: the old master answers MOVED to its
  // replica's TLS port, which the client follows.
  cluster.failover(3);
  auto moved = holder.acquire(names[0], 5s, lease_of(30s));
  ASSERT_TRUE(moved.ok()) << moved.status().to_string();
  EXPECT_EQ(cluster.cli(3, {"EXISTS", lock_key(names[0])}), "1");
  EXPECT_TRUE(moved->release().ok());
}

// A cluster that does not know sharded pub/sub (as Redis 6; here the
// commands are renamed away): pubsub=auto falls back to classic pub/sub,
// and waiters are still woken by the release, not by the 30 s lease;
// pubsub=sharded is refused at connect, saying why.
TEST(RedisClusterOlderServers, WithoutShardedPubSubWaitersUseClassicPubSub) {
  LogSink log;
  RedisCluster cluster(1, 0, {"--rename-command", "SSUBSCRIBE", "", "--rename-command", "SPUBLISH", ""});
  auto forced = Client::try_connect(cluster.url() + "?pubsub=sharded", quiet(log));
  ASSERT_FALSE(forced.ok());
  EXPECT_EQ(forced.code(), Errc::invalid_argument);
  EXPECT_NE(forced.status().message().find("Redis 7"), std::string::npos) << forced.status().message();
  Client holder = Client::connect(cluster.url(), quiet(log));
  Client waiter = Client::connect(cluster.url(), quiet(log));
  auto lease = holder.try_acquire("old", lease_of(30s));
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  auto got = std::async(std::launch::async, [&] { return waiter.acquire("old", 10s); });
  EXPECT_TRUE(eventually([&] { return subscribers(cluster, 0, "NUMSUB", "old") == 1; }, 5s));
  ASSERT_TRUE(lease->release().ok());
  auto r = got.get();
  EXPECT_TRUE(r.ok()) << r.status().to_string();
}

// The master that holds a lock is killed: its replica takes over (the grant
// had reached it), and a waiter on the same slot is served by the new master.
TEST(RedisClusterKill, KilledMasterIsReplacedAndWaitersProceed) {
  LogSink log;
  RedisCluster cluster(3, 1);
  Client holder = Client::connect(cluster.url(), quiet(log));
  Client waiter = Client::connect(cluster.url(), quiet(log));
  std::string name;
  for (int i = 0; name.empty(); ++i)
    if (cluster.master_of_slot(slot_of("kill" + std::to_string(i))) == 0) name = "kill" + std::to_string(i);
  LockOptions o;
  o.lease = 3s;  // fixed: nothing renews it
  auto lease = holder.try_acquire(name, o);
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  SyncRedis replica(cluster.node(3).port());
  replica.cmd({"READONLY"});  // a replica answers MOVED otherwise
  ASSERT_TRUE(eventually([&] { return replica.integer({"EXISTS", lock_key(name)}) == 1; }, 5s));
  const std::uint64_t fence = lease->fence();
  // A failover takes the node timeout and an election: retry through it.
  LockOptions patient = o;
  patient.error_retry = 20s;
  auto got = std::async(std::launch::async, [&] { return waiter.acquire(name, 30s, patient); });
  cluster.node(0).kill9();
  auto r = got.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_GT(r->fence(), fence);
  EXPECT_EQ(cluster.master_of_slot(slot_of(name)), 3);
}

// Every node frozen past the command timeout while an acquire waits: the
// attempt the nodes read when they wake is undone, and the name is free
// again at once (not after the 30 s watchdog lease).
TEST_F(RedisClusterTest, AnAttemptGrantedAfterAFreezeIsUndone) {
  Client client = connect();
  ASSERT_TRUE(client.try_acquire("thaw").value().release().ok());
  for (int i = 0; i < 3; ++i) cluster_->node(i).pause();
  auto r = client.acquire("thaw", 1s);
  EXPECT_EQ(r.code(), Errc::timeout) << r.status().to_string();
  std::this_thread::sleep_for(2500ms);
  for (int i = 0; i < 3; ++i) cluster_->node(i).resume();
  // Replicas were silent too: they may have been failed over meanwhile.
  cluster_->wait_ok();
  Client other = connect();
  auto got = other.acquire("thaw", 10s);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
}

// WAIT mode in a cluster: the WAIT goes with the script to its master, so
// the grant is on that master's replica when acquire returns.
TEST_F(RedisClusterTest, WaitModeGrantsAreOnTheMastersReplicaWhenAcquireReturns) {
  Client client = Client::connect(cluster_->url() + "?wait_replicas=1&wait_timeout_ms=2000", quiet(log));
  for (int m = 0; m < 3; ++m) {
    const std::string name = name_on(m, "waited" + std::to_string(m) + "-");
    int replica = -1;
    for (int r = 0; r < cluster_->size(); ++r)
      if (cluster_->cli(r, {"INFO", "replication"}).find("master_port:" + std::to_string(cluster_->node(m).port())) !=
          std::string::npos)
        replica = r;
    ASSERT_GE(replica, 0) << "master " << m << " has a replica";
    auto lease = client.try_acquire(name, lease_of(10s));
    ASSERT_TRUE(lease.ok()) << lease.status().to_string();
    SyncRedis on_replica(cluster_->node(replica).port());
    on_replica.cmd({"READONLY"});
    EXPECT_EQ(on_replica.integer({"EXISTS", lock_key(name)}), 1) << "no eventually(): WAIT returned after the replica";
    EXPECT_TRUE(lease->release().ok());
  }
}

#ifdef DLOCK_CLI_PATH
// The dlock tool takes the cluster URL like any other: a run holds the lock
// on its slot's master, another run is told who holds it, status reads it.
TEST_F(RedisClusterTest, TheToolRunsThroughTheCluster) {
  const Env env = {{"DLOCK_URL", cluster_->url()}};
  auto dlock = [&](std::vector<std::string> args) {
    args.insert(args.begin(), DLOCK_CLI_PATH);
    return run(args, 30s, env);
  };
  auto once = dlock({"run", "nightly", "--", "sh", "-c", "echo $DLOCK_FENCE"});
  ASSERT_EQ(once.exit_code, 0) << once.err;
  EXPECT_GT(std::stoull(once.out), 1000000000000000ULL) << "a per-name fence from the server's clock (µs)";
  std::thread holder([&] { dlock({"run", "--label", "report", "nightly", "--", "sleep", "3"}); });
  const int m = cluster_->master_of_slot(slot_of("nightly"));
  ASSERT_TRUE(eventually([&] { return cluster_->cli(m, {"EXISTS", lock_key("nightly")}) == "1"; }, 10s));
  auto busy = dlock({"run", "--wait", "0", "nightly", "--", "true"});
  EXPECT_EQ(busy.exit_code, 75) << busy.err;
  EXPECT_NE(busy.err.find("held by report["), std::string::npos) << busy.err;
  auto status = dlock({"status", "nightly"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("nightly: held by report["), std::string::npos) << status.out;
  holder.join();
}
#endif

}  // namespace
}  // namespace dlock::test

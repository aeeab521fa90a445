// A mixed fleet on one Redis name (interop_fleet.hpp): dlock processes
// beside processes of a peer library that keeps the same layout, redis-py's
// Lock and npm redlock (?layout=plain), node-redisson's RLock
// (?layout=redisson); and the peers' holds as dlock sees them.
#include <cstdlib>
#include <filesystem>

#include "integration/interop_fleet.hpp"

namespace dlock::test {
namespace {

using interop::Event;
using interop::judge;
using interop::Peer;
using interop::Verdict;

// An npm package's worker (tests/integration/peers/), the package from
// $DLOCK_PEERS_MODULES (bench/peers/package.json, installed by scripts/test).
std::optional<Peer> npm_peer(const std::string& side, const std::string& package, const std::string& script) {
  const char* dir = std::getenv("DLOCK_PEERS_MODULES");
  if (dir == nullptr || !std::filesystem::exists(std::filesystem::path(dir) / "node_modules" / package)) {
    return std::nullopt;
  }
  return Peer{side, {"node", std::string(DLOCK_PEERS_DIR) + "/" + script}, {{"DLOCK_PEERS_MODULES", dir}}};
}

// `procs` processes of each side on one name for `seconds`, leases of
// 1.5 s; the holder SIGKILLed `kills` times, the sides in turn.
void run_redis_fleet(const Peer& peer, int procs, double seconds, int kills, const std::string& layout = "plain",
                     milliseconds woken_within = milliseconds(0), const std::string& name = "interop:job") {
  RedisServer server;
  constexpr milliseconds kLease{1500};
  interop::Fleet f;
  f.peer = peer;
  f.dlock_url = server.url() + "?layout=" + layout;
  f.name = name;
  f.lock.watchdog_lease = kLease;
  f.lock.renew_interval = kLease / 3;
  f.log_port = server.port();
  f.procs = procs;
  f.seconds = seconds;
  f.kills = kills;
  f.woken_within = woken_within;
  // PORT NAME LOG COUNTER SECONDS TTL_MS HOLD_MS
  f.peer_args = {std::to_string(server.port()),  f.name, interop::kLog, interop::kCounter, std::to_string(seconds),
                 std::to_string(kLease.count()), "20"};
  interop::run_mixed_fleet(f);
}

// The judge itself, on logs made by hand: it can fail.
TEST(RedisInterop, TheLogJudgeSeesAnOverlapAndALostHoldersKill) {
  std::vector<Event> ok{{"start", "dlock", 1, 10, 5},
                        {"end", "dlock", 1, 20},
                        {"start", "redis-py", 2, 30},
                        {"killed", "redis-py", 2, 40},
                        {"start", "dlock", 3, 50, 6}};
  Verdict v = judge(ok);
  EXPECT_EQ(v.overlaps, 0);
  EXPECT_EQ(v.kills_in_hold, 1);
  EXPECT_EQ(v.handovers_ms["dlock -> redis-py"].size(), 1u);
  EXPECT_TRUE(v.dlock_fences_increase);
  std::vector<Event> bad{{"start", "dlock", 1, 10, 5},
                         {"start", "redis-py", 2, 30},
                         {"end", "dlock", 1, 40},
                         {"start", "dlock", 3, 50, 4}};
  v = judge(bad);
  EXPECT_EQ(v.overlaps, 2) << "redis-py 2 over dlock 1, then dlock 3 over redis-py 2";
  EXPECT_FALSE(v.dlock_fences_increase);
}

TEST(RedisInterop, DlockAndRedisPyLockShareOneNameBothWays) {
  auto peer = interop::python_peer("redis-py", "redis", "redispy_lock_worker.py");
  if (!peer) GTEST_SKIP() << "python3 with redis-py (Debian's python3-redis) is not installed";
  run_redis_fleet(*peer, 3, 8, 2);
}

TEST(RedisInterop, DlockAndNpmRedlockShareOneNameBothWays) {
  auto peer = npm_peer("redlock", "redlock", "redlock_worker.mjs");
  if (!peer) GTEST_SKIP() << "npm redlock is not installed ($DLOCK_PEERS_MODULES; scripts/test installs it)";
  run_redis_fleet(*peer, 3, 8, 2);
}

// Redisson's RLock (node-redisson, which keeps Java Redisson's scripts and
// keys): waiters of each side woken by the other's releases on
// redisson_lock__channel:{NAME}.
TEST(RedisInterop, DlockAndRedissonShareOneNameBothWays) {
  auto peer = npm_peer("redisson", "node-redisson", "redisson_worker.mjs");
  if (!peer) GTEST_SKIP() << "node-redisson is not installed ($DLOCK_PEERS_MODULES; scripts/test installs it)";
  run_redis_fleet(*peer, 3, 8, 2, "redisson", 500ms);
}

// A name with '{' not at its start: Java Redisson (and dlock) publish on
// redisson_lock__channel:job{7}a, node-redisson on ...:{job{7}a}. Each side
// waited out the other's whole lease; dlock now publishes and listens on both.
TEST(RedisInterop, DlockAndRedissonWakeEachOtherOnANameWithABraceInside) {
  auto peer = npm_peer("redisson", "node-redisson", "redisson_worker.mjs");
  if (!peer) GTEST_SKIP() << "node-redisson is not installed ($DLOCK_PEERS_MODULES; scripts/test installs it)";
  run_redis_fleet(*peer, 3, 6, 0, "redisson", 500ms, "job{7}a");
}

// Redisson's hold, made as its acquire script makes it (the hash at the
// name, field "<uuid>:<thread id>" = count, PEXPIRE): busy for dlock and
// named; its release (HINCRBY -1, DEL, PUBLISH '0' on its channel) wakes
// dlock's waiter at once. dlock's hold is one Redisson's acquire finds
// taken and its unlock (not the owner) leaves alone.
TEST(RedisInterop, ARedissonHoldIsBusyAndNamedAndItsReleaseWakesDlock) {
  RedisServer server;
  SyncRedis redis(server.port());
  const std::string field = "8743c9c0-0795-4907-87fd-6c719a6b4586:1";
  ASSERT_EQ(redis.integer({"HINCRBY", "orders:job", field, "1"}), 1);
  ASSERT_EQ(redis.integer({"PEXPIRE", "orders:job", "30000"}), 1);
  LogSink log;
  auto client = Client::connect(server.url() + "?layout=redisson", quiet(log));
  auto busy = client.acquire("orders:job", 0ms);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), Errc::busy);
  auto info = client.inspect("orders:job");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_TRUE(info->held);
  EXPECT_NE(info->holder.find("Redisson"), std::string::npos) << info->holder;
  EXPECT_NE(info->holder.find(field), std::string::npos) << info->holder;
  auto names = client.list("orders:j");
  ASSERT_TRUE(names.ok()) << names.status().to_string();
  ASSERT_EQ(names->size(), 1u);
  EXPECT_EQ(names->front().name, "orders:job");
  // node-redisson's field is "<uuid>:<uuid>" (shown as "holder ?, count 0").
  const std::string node_field = "0a3e7f1c-9d1b-4a57-9a4e-5b8f0c2d6e11:5c4b3a29-1e0f-4d8c-8b7a-6f5e4d3c2b1a";
  ASSERT_EQ(redis.integer({"HINCRBY", "orders:node", node_field, "2"}), 2);
  ASSERT_EQ(redis.integer({"PEXPIRE", "orders:node", "30000"}), 1);
  auto node = client.inspect("orders:node");
  ASSERT_TRUE(node.ok()) << node.status().to_string();
  EXPECT_EQ(node->holder, "Redisson (holder " + node_field + ", count 2)");
  EXPECT_EQ(node->reentry_count, 2u);

  // Redisson's unlock 1.5 s from now: dlock's waiter is woken by its
  // message, long before the 30 s lease would end.
  std::thread peer([&] {
    std::this_thread::sleep_for(300ms);
    SyncRedis r(server.port());
    r.cmd({"EVAL",
           "if redis.call('hincrby', KEYS[1], ARGV[1], -1) <= 0 then redis.call('del', KEYS[1]); "
           "redis.call('publish', KEYS[2], '0') end return 1",
           "2", "orders:job", "redisson_lock__channel:{orders:job}", field});
  });
  const auto asked = Clock::now();
  auto lk = client.acquire("orders:job", 10s);
  peer.join();
  ASSERT_TRUE(lk.ok()) << lk.status().to_string();
  EXPECT_LT(Clock::now() - asked, 5s) << "woken by Redisson's unlock message, not the lease's end";
  EXPECT_GT(lk->fence(), 0u);
  // dlock's hold: a Redisson holder field of count 1 and dlock's own field.
  EXPECT_EQ(redis.cmd({"TYPE", "orders:job"}), "hash");
  EXPECT_EQ(redis.integer({"HLEN", "orders:job"}), 2);
  EXPECT_GT(redis.integer({"PTTL", "orders:job"}), 0);
  // Redisson's acquire (3.19+'s script) finds it taken and answers its PTTL;
  // its unlock of another field is not the owner's (nil).
  const std::string acquire =
      "if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
      "redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
      "return redis.call('pttl', KEYS[1]);";
  EXPECT_NE(redis.cmd({"EVAL", acquire, "1", "orders:job", "30000", field}), "(nil)");
  EXPECT_EQ(redis.cmd({"EVAL", "if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return nil end return 1", "1",
                       "orders:job", field}),
            "(nil)");
  ASSERT_TRUE(lk->release().ok());
  EXPECT_EQ(redis.integer({"EXISTS", "orders:job"}), 0);
  EXPECT_EQ(redis.cmd({"EVAL", acquire, "1", "orders:job", "30000", field}), "(nil)") << "free again for Redisson";
  // Lines are refused, naming why.
  SharedMutex rw(client, "orders:rw");
  try {
    rw.lock_shared();
    ADD_FAILURE() << "a read lock in the redisson layout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("layout=redisson"), std::string::npos) << e.what();
  }
  // A name holding another type is wrong_type, and left alone.
  ASSERT_EQ(redis.cmd({"SET", "a-string", "v"}), "OK");
  auto wrong = client.acquire("a-string", 0ms);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), Errc::wrong_type) << wrong.status().to_string();
  EXPECT_EQ(redis.cmd({"GET", "a-string"}), "v");
}

// The peers' own view of a dlock holder, and dlock's of theirs: a token
// each library compares with its own, so neither releases or extends the
// other's lock, and dlock's status names the peer's hold.
TEST(RedisInterop, APeersHoldIsBusyAndNamedAndItsReleaseIsNotDlocks) {
  RedisServer server;
  SyncRedis redis(server.port());
  // redis-py's Lock, by hand: SET NX PX with its token.
  ASSERT_EQ(redis.cmd({"SET", "shared:job", "0123456789abcdef0123456789abcdef", "NX", "PX", "5000"}), "OK");
  LogSink log;
  auto client = Client::connect(server.url() + "?layout=plain", quiet(log));
  auto busy = client.acquire("shared:job", 0ms);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), Errc::busy);
  auto info = client.inspect("shared:job");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_TRUE(info->held);
  EXPECT_NE(info->holder.find("a peer library"), std::string::npos) << info->holder;
  EXPECT_NE(info->holder.find("0123456789abcdef"), std::string::npos) << info->holder;
  auto names = client.list("shared:");
  ASSERT_TRUE(names.ok()) << names.status().to_string();
  ASSERT_EQ(names->size(), 1u);
  EXPECT_EQ(names->front().name, "shared:job");
  EXPECT_TRUE(names->front().info.held);

  // The peer releases (compare-and-delete with its token): dlock's waiter
  // polls and is granted, with a fence.
  std::thread peer([&] {
    std::this_thread::sleep_for(100ms);
    SyncRedis r(server.port());
    r.cmd({"EVAL", "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0", "1",
           "shared:job", "0123456789abcdef0123456789abcdef"});
  });
  auto lk = client.acquire("shared:job", 5s);
  peer.join();
  ASSERT_TRUE(lk.ok()) << lk.status().to_string();
  EXPECT_GT(lk->fence(), 0u);
  // The peer's release script, with its token, leaves dlock's hold alone;
  // its SET NX finds it taken.
  EXPECT_EQ(
      redis.cmd({"EVAL", "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
                 "1", "shared:job", "0123456789abcdef0123456789abcdef"}),
      "0");
  EXPECT_EQ(redis.cmd({"SET", "shared:job", "fedcba", "NX", "PX", "5000"}), "(nil)");
  EXPECT_EQ(redis.integer({"EXISTS", "shared:job"}), 1);
  EXPECT_GT(redis.integer({"PTTL", "shared:job"}), 0) << "dlock's hold carries its lease, as a peer's";
  ASSERT_TRUE(lk->release().ok());
  EXPECT_EQ(redis.integer({"EXISTS", "shared:job"}), 0) << "released: gone, so a peer's SET NX takes it";
  // Lines are refused, naming why.
  SharedMutex rw(client, "shared:rw");
  try {
    rw.lock_shared();
    ADD_FAILURE() << "a read lock in the plain layout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("layout=plain"), std::string::npos) << e.what();
  }
}

// Bad input in a shared key space: a name that holds another type, a TTL
// out of range. Told as what it is; nothing is written.
TEST(RedisInterop, ANameHoldingAnotherTypeIsWrongTypeAndLeftAlone) {
  RedisServer server;
  SyncRedis redis(server.port());
  ASSERT_EQ(redis.integer({"HSET", "a-hash", "f", "v"}), 1);
  LogSink log;
  auto client = Client::connect(server.url() + "?layout=plain", quiet(log));
  auto r = client.acquire("a-hash", 0ms);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::wrong_type) << r.status().to_string();
  EXPECT_NE(r.status().message().find("the key a-hash holds another Redis type"), std::string::npos)
      << r.status().to_string();
  EXPECT_EQ(r.status().message().find("script:"), std::string::npos) << "Redis's own text (the script's hash)";
  EXPECT_EQ(redis.cmd({"HGET", "a-hash", "f"}), "v");
  auto info = client.inspect("a-hash");
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), Errc::wrong_type) << info.status().to_string();
  LockOptions zero;
  zero.lease = 0ms;
  auto bad = client.acquire("fresh", 0ms, zero);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::invalid_argument) << bad.status().to_string();
  EXPECT_EQ(redis.integer({"EXISTS", "fresh"}), 0);
}

// A peer's key with no expiry (redis-py's Lock with timeout=None): dlock
// polls, and is granted once the peer deletes it.
TEST(RedisInterop, APeersKeyWithoutExpiryIsPolledNotSpunOn) {
  RedisServer server;
  SyncRedis redis(server.port());
  ASSERT_EQ(redis.cmd({"SET", "forever", "peer-token"}), "OK");
  LogSink log;
  auto client = Client::connect(server.url() + "?layout=plain", quiet(log));
  const auto sent_before = client.stats().commands_sent;
  auto busy = client.acquire("forever", 600ms);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), Errc::timeout);
  // Polled from 2 ms doubling to 64 ms: about 15 tries in 600 ms, not a spin.
  EXPECT_LT(client.stats().commands_sent - sent_before, 60u);
  std::thread peer([&] {
    std::this_thread::sleep_for(200ms);
    SyncRedis r(server.port());
    r.cmd({"DEL", "forever"});
  });
  auto lk = client.acquire("forever", 5s);
  peer.join();
  EXPECT_TRUE(lk.ok()) << lk.status().to_string();
}

}  // namespace
}  // namespace dlock::test

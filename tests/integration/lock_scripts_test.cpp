// The lock scripts' contract for repeated attempts, on a real redis-server:
// a replay counts its lease from the replay, and an undo that names an
// earlier attempt leaves a later attempt's grant alone (Redlock retries with
// the same owner, and a failed attempt's undo may arrive after the next one).
#include <fstream>
#include <sstream>

#include "integration/common.hpp"
#include "redis/scripts.hpp"

namespace dlock::test {
namespace {

const std::string kLock = "dlock:{s}";
const std::string kFence = "dlock:{s}:fence";

class LockScripts : public ::testing::Test {
 protected:
  std::string acquire(const std::string& owner, long long lease_ms, int held, int round) {
    return redis.cmd({"EVAL", std::string(dlock::redis::acquire_script().body), "4", kLock, kFence,
                      kLock + ":t:" + owner, kLock + ":q", owner, std::to_string(lease_ms), std::to_string(held),
                      std::to_string(round), "dlock:{s}:wake"});
  }
  // A caller that will wait: its waiter member, and whether it waited before.
  std::string acquire_waiting(const std::string& owner, const std::string& member, bool waited) {
    return redis.cmd({"EVAL", std::string(dlock::redis::acquire_script().body), "4", kLock, kFence,
                      kLock + ":t:" + owner, kLock + ":q", owner, "10000", "0", "0", "dlock:{s}:wake", "", "0", member,
                      waited ? "1" : "0"});
  }
  std::string queue() { return redis.cmd({"ZRANGE", kLock + ":w", "0", "-1"}); }
  std::string release(const std::string& owner, int held, int round, long long tombstone_ms = 0) {
    return redis.cmd({"EVAL", std::string(dlock::redis::release_script().body), "4", kLock, kLock + ":t:" + owner,
                      kLock + ":q", kFence, owner, std::to_string(held), "dlock:{s}:released", "0",
                      std::to_string(round), std::to_string(tombstone_ms)});
  }
  // Fences counted from a counter already raised (fence.lua raises one that
  // starts low to the server's clock): grant n's fence is kBase + n.
  void SetUp() override { redis.cmd({"SET", kFence, std::to_string(kBase)}); }
  static constexpr long long kBase = 1000000000000LL;
  // An acquire's answer: granted, its fence, its depth.
  static std::string granted(int fence, int depth = 1) {
    return "1\n" + std::to_string(kBase + fence) + "\n" + std::to_string(depth);
  }
  RedisServer server;
  SyncRedis redis{server.port()};
};

// The plain lock's waiters (wake_lib.lua): they queue in arrival order; a
// release wakes the first and keeps the lock for it; a fresh caller is
// refused meanwhile; one that missed its reservation goes back to the
// front, not the end.
TEST_F(LockScripts, AWaiterThatMissedItsTurnGoesBackToTheFront) {
  EXPECT_EQ(acquire("H", 10000, 0, 0), granted(1));
  EXPECT_EQ(acquire_waiting("A", "ca:1", false).substr(0, 2), "0\n");
  EXPECT_EQ(acquire_waiting("B", "cb:2", false).substr(0, 2), "0\n");
  EXPECT_EQ(queue(), "ca:1\ncb:2");
  SyncRedis listener(server.port());
  listener.cmd({"SUBSCRIBE", "dlock:{s}:released:ca"});  // A's client listens (release() names this channel)
  EXPECT_EQ(release("H", 1, 0), "0\n0");
  EXPECT_EQ(redis.cmd({"GET", kLock + ":r"}), "ca:1") << "kept for the waiter woken";
  EXPECT_EQ(queue(), "cb:2");
  EXPECT_EQ(acquire("F", 10000, 0, 0).substr(0, 2), "0\n") << "a fresh caller took the lock kept for A";
  redis.cmd({"DEL", kLock + ":r"});  // A never came: its reservation ran out
  EXPECT_EQ(acquire("F", 10000, 0, 0), granted(2)) << "barging is allowed once nobody is kept waiting";
  EXPECT_EQ(acquire_waiting("A", "ca:1", true).substr(0, 2), "0\n");
  EXPECT_EQ(queue(), "ca:1\ncb:2") << "A missed one turn: back to the front";
}

TEST_F(LockScripts, LateUndoOfAnEarlierAttemptLeavesTheLaterGrant) {
  EXPECT_EQ(acquire("T", 10000, 0, 1), granted(1));
  // Attempt 1 failed elsewhere; attempt 2 finds its grant and takes it over.
  EXPECT_EQ(acquire("T", 10000, 0, 2), granted(1));
  EXPECT_EQ(release("T", 1, 1), "-4\n1") << "attempt 1's undo must not remove attempt 2's grant";
  EXPECT_EQ(redis.integer({"EXISTS", kLock}), 1);
  EXPECT_EQ(release("T", 1, 2), "0\n0");
  EXPECT_EQ(redis.integer({"EXISTS", kLock}), 0);
}

TEST_F(LockScripts, AnOlderAttemptDoesNotTakeTheGrantBack) {
  EXPECT_EQ(acquire("T", 10000, 0, 5), granted(1));
  EXPECT_EQ(acquire("T", 10000, 0, 4), granted(1));  // delivered late: answered, not applied
  EXPECT_EQ(release("T", 1, 4), "-4\n1");
  EXPECT_EQ(redis.integer({"EXISTS", kLock}), 1);
}

TEST_F(LockScripts, ReplayCountsItsLeaseFromTheReplay) {
  EXPECT_EQ(acquire("T", 300, 0, 1), granted(1));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(acquire("T", 1000, 0, 2), granted(1));
  EXPECT_GT(redis.integer({"PTTL", kLock}), 900) << "the caller counts 1000 ms from the replay";
}

TEST_F(LockScripts, SingleServerCallsNameNoAttempt) {
  // Attempt 0 (one server): replays and releases work as before.
  EXPECT_EQ(acquire("T", 10000, 0, 0), granted(1));
  EXPECT_EQ(acquire("T", 10000, 0, 0), granted(1));
  EXPECT_EQ(acquire("T", 10000, 1, 0), granted(1, 2));
  EXPECT_EQ(release("T", 2, 0), "1\n1");
  EXPECT_EQ(release("T", 1, 0), "0\n0");
  EXPECT_EQ(acquire("U", 10000, 0, 0), granted(2));
}

// Owners on the wire are "<owner>/<grant>": calls of one grant never touch
// another grant of the same owner.
TEST_F(LockScripts, ACallOfAnEarlierGrantLeavesTheNextGrantAlone) {
  EXPECT_EQ(acquire("T/1", 10000, 0, 0), granted(1));
  EXPECT_EQ(release("T/1", 1, 0), "0\n0");
  EXPECT_EQ(acquire("T/2", 10000, 0, 0), granted(2));
  EXPECT_EQ(release("T/1", 1, 0), "-2\n0") << "a delayed release of grant 1";
  EXPECT_EQ(acquire("T/1", 10000, 1, 0), "2\n0\n0") << "a delayed re-entry of grant 1: lost, grant 1 is gone";
  EXPECT_EQ(redis.cmd({"HGET", kLock, "n"}), "1");
}

TEST_F(LockScripts, ATombstoneRefusesAStrayCopyOfAReleasedGrant) {
  EXPECT_EQ(acquire("T/7", 10000, 0, 0), granted(1));
  EXPECT_EQ(release("T/7", 1, 0, 5000), "0\n0");
  EXPECT_EQ(acquire("T/7", 10000, 0, 0), "2\n0\n0") << "the stray copy is refused";
  EXPECT_EQ(redis.integer({"EXISTS", kLock}), 0);
  EXPECT_EQ(acquire("T/8", 10000, 0, 0), granted(2)) << "other grants are not";
  EXPECT_GT(redis.integer({"PTTL", kLock + ":t:T/7"}), 4000);
}

TEST_F(LockScripts, ALeaseOutOfRangeWritesNothing) {
  EXPECT_NE(acquire("T/1", 0, 0, 0).find("lease out of range"), std::string::npos);
  // PEXPIRE is sent the caller's digits as they are: anything else is refused
  // before the hold is written (a hold without a TTL would never end).
  for (const char* lease : {"3e4", "30000.5", " 30000", "-1", ""}) {
    EXPECT_NE(redis
                  .cmd({"EVAL", std::string(dlock::redis::acquire_script().body), "4", kLock, kFence, kLock + ":t:T/1",
                        kLock + ":q", "T/1", lease, "0", "0", "dlock:{s}:wake"})
                  .find("lease out of range"),
              std::string::npos)
        << lease;
  }
  EXPECT_NE(acquire("T/1", 9223372036854775807LL, 0, 0).find("lease out of range"), std::string::npos);
  EXPECT_EQ(redis.integer({"EXISTS", kLock}), 0);
  EXPECT_EQ(redis.cmd({"GET", kFence}), std::to_string(kBase)) << "no fence was drawn";
}

// A server that lost its scripts (SCRIPT FLUSH, a restart, a failover to
// a node that never ran them) answers EVALSHA with NOSCRIPT: nothing ran, and
// the call is sent again whole (EVAL), on the blocking fast path and on the
// I/O thread's path alike.
TEST_F(LockScripts, CallsAfterTheServerLostItsScriptsAreSentWhole) {
  LogSink log;
  Client client = Client::connect(server.url(), quiet(log));
  auto fast = client.try_acquire("flushed");  // the fast path: scripts now known on its connection
  ASSERT_TRUE(fast.ok()) << fast.status().to_string();
  ASSERT_EQ(redis.cmd({"SCRIPT", "FLUSH"}), "OK");
  EXPECT_TRUE(fast->release().ok()) << "the fast path's release after the flush";
  auto again = client.try_acquire("flushed");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  ASSERT_TRUE(again->release().ok());
  const auto io_path = [&](const std::string& name) {
    std::promise<Result<Lease>> got;
    client.async_acquire(name, 0ms, {}, [&](Result<Lease> r) { got.set_value(std::move(r)); });
    return got.get_future().get();
  };
  auto first = io_path("flushed-io");
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  ASSERT_EQ(redis.cmd({"SCRIPT", "FLUSH"}), "OK");
  std::promise<Status> released;
  client.async_release(std::move(*first), [&](Status s) { released.set_value(s); });
  EXPECT_TRUE(released.get_future().get().ok()) << "the I/O path's release after the flush";
  ASSERT_EQ(redis.cmd({"SCRIPT", "FLUSH"}), "OK");
  auto second = io_path("flushed-io");
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_EQ(redis.integer({"EXISTS", "dlock:{flushed-io}"}), 1);
  ASSERT_TRUE(second->release().ok());
  EXPECT_EQ(redis.integer({"EXISTS", "dlock:{flushed}", "dlock:{flushed-io}"}), 0);
  // Each call after a flush was answered NOSCRIPT first: the fallback ran.
  const std::string errors = redis.cmd({"INFO", "errorstats"});
  const auto at = errors.find("errorstat_NOSCRIPT:count=");
  ASSERT_NE(at, std::string::npos) << errors;
  EXPECT_GE(std::atoi(errors.c_str() + at + 25), 3) << errors;
}

// An upgrade runs clients of two versions on one server: a client with
// today's scripts and one with 0.2.0's (tests/integration/data) exclude
// each other both ways, and their fences keep increasing across them.
TEST_F(LockScripts, ClientsBeforeAndAfterAScriptChangeExcludeEachOther) {
  std::ifstream in(DLOCK_OLD_ACQUIRE_SCRIPT);
  std::stringstream text;
  text << in.rdbuf();
  const std::string old_acquire = text.str();
  ASSERT_FALSE(old_acquire.empty());
  const std::string lock = "dlock:{up}", fence = "dlock:fence";
  auto old_call = [&](const std::string& owner) {
    return redis.cmd({"EVAL", old_acquire, "4", lock, fence, lock + ":t:" + owner, lock + ":q", owner, "10000", "0",
                      "0", "dlock:{up}:wake", "an old client"});
  };
  auto old_release = [&](const std::string& owner) {
    return redis.cmd({"EVAL", std::string(dlock::redis::release_script().body), "4", lock, lock + ":t:" + owner,
                      lock + ":q", fence, owner, "1", "dlock:{up}:wake", "0", "0", "0"});
  };
  Client client = Client::connect(server.url());
  // The old client holds: the new one is refused, and sees who holds it.
  EXPECT_EQ(old_call("OLD/1"), "1\n1\n1");
  EXPECT_EQ(client.try_acquire("up").code(), Errc::busy);
  auto seen = client.inspect("up");
  ASSERT_TRUE(seen.ok()) << seen.status().to_string();
  EXPECT_TRUE(seen.value().held);
  EXPECT_EQ(seen.value().holder, "an old client");
  EXPECT_EQ(old_release("OLD/1"), "0\n0");
  // The new client holds: the old one is refused (busy, the holder's TTL).
  auto held = client.try_acquire("up");
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  const std::uint64_t new_fence = held.value().fence();
  EXPECT_GT(new_fence, 1'000'000'000'000u) << "the old client's counter, raised to the server's clock";
  auto refused = old_call("OLD/2");
  EXPECT_EQ(refused.substr(0, 2), "0\n") << refused;
  seen = client.inspect("up");
  ASSERT_TRUE(seen.ok());
  ASSERT_TRUE(seen.value().held_for.has_value()) << "the new grant's time, from the holder's clock";
  EXPECT_LT(*seen.value().held_for, std::chrono::milliseconds(60000));
  ASSERT_TRUE(held.value().release().ok());
  // And the old one again, with a larger fence.
  EXPECT_EQ(old_call("OLD/3"), "1\n" + std::to_string(new_fence + 1) + "\n1");
}

}  // namespace
}  // namespace dlock::test

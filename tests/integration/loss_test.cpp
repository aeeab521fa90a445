// The loss signal: the holder learns at once when its lock is gone.
#include <future>

#include "integration/common.hpp"

namespace dlock::test {
namespace {

struct LossProbe {
  std::atomic<int> calls{0};
  std::atomic<int> reason{-1};
  std::atomic<long long> at_ms{-1};
  Clock::time_point t0 = Clock::now();
  LockOptions options(milliseconds lease, milliseconds interval) {
    LockOptions o = fast_watchdog(lease, interval);
    o.on_lost = [this](LossReason r) {
      reason = static_cast<int>(r);
      at_ms = ms_since(t0);
      ++calls;
    };
    return o;
  }
};

class Loss : public ::testing::Test {
 protected:
  RedisServer server;
  LogSink log;
  Client client = Client::connect(server.url(), quiet(log));
  LossProbe probe;
};

TEST_F(Loss, KeyDeletedBehindTheHoldersBack) {
  auto lease = client.try_acquire("l1", probe.options(3000ms, 1000ms)).value();
  std::atomic<bool> token_fired{false};
  std::stop_callback cb(lease.lost_token(), [&] { token_fired = true; });
  SyncRedis(server.port()).cmd({"DEL", "dlock:{l1}"});
  probe.t0 = Clock::now();
  ASSERT_TRUE(eventually([&] { return probe.calls.load() == 1; }, 3s));
  EXPECT_EQ(probe.reason.load(), static_cast<int>(LossReason::expired));
  EXPECT_TRUE(token_fired.load());
  EXPECT_TRUE(lease.lost());
  measure("loss_detect_key_deleted", probe.at_ms.load());
  EXPECT_LE(probe.at_ms.load(), 1000 + 300) << "within one renewal interval";
  EXPECT_EQ(client.stats().leases_lost, 1u);
  // No silent re-acquire: the key stays absent.
  std::this_thread::sleep_for(1200ms);
  EXPECT_FALSE(client.inspect("l1").value().held);
}

TEST_F(Loss, KeyOverwrittenByAnotherOwner) {
  auto lease = client.try_acquire("l2", probe.options(3000ms, 500ms)).value();
  SyncRedis(server.port()).cmd({"HSET", "dlock:{l2}", "o", "intruder"});
  probe.t0 = Clock::now();
  ASSERT_TRUE(eventually([&] { return probe.calls.load() == 1; }, 3s));
  EXPECT_EQ(probe.reason.load(), static_cast<int>(LossReason::taken));
  measure("loss_detect_key_taken", probe.at_ms.load());
  EXPECT_EQ(lease.release().code(), Errc::not_owner) << "the intruder's lock is left alone";
  EXPECT_EQ(SyncRedis(server.port()).cmd({"HGET", "dlock:{l2}", "o"}), "intruder");
}

TEST_F(Loss, RedisStoppedFiresWithinOneRenewalInterval) {
  auto lease = client.try_acquire("l3", probe.options(5000ms, 1000ms)).value();
  server.stop();
  probe.t0 = Clock::now();
  ASSERT_TRUE(eventually([&] { return probe.calls.load() == 1; }, 5s));
  EXPECT_EQ(probe.reason.load(), static_cast<int>(LossReason::unreachable));
  measure("loss_detect_redis_stopped", probe.at_ms.load());
  EXPECT_LE(probe.at_ms.load(), 1000 + 300);
  EXPECT_LT(Clock::now(), lease.valid_until() + 1ms) << "signalled before the lease could have run out";
}

TEST_F(Loss, RedisRestartedWithoutPersistence) {
  auto lease = client.try_acquire("l4", probe.options(5000ms, 1000ms)).value();
  server.stop();
  server.start();
  probe.t0 = Clock::now();
  ASSERT_TRUE(eventually([&] { return probe.calls.load() == 1; }, 5s));
  // Either the renewal found the key gone (expired) or could not confirm in
  // time (unreachable): both are a loss, neither re-creates the key.
  EXPECT_TRUE(probe.reason.load() == static_cast<int>(LossReason::expired) ||
              probe.reason.load() == static_cast<int>(LossReason::unreachable));
  measure("loss_detect_redis_restarted", probe.at_ms.load());
  EXPECT_FALSE(client.inspect("l4").value().held);
}

TEST_F(Loss, ReentryAfterLossFailsInsteadOfReacquiring) {
  Mutex m(client, "l5", fast_watchdog(3000ms, 1000ms));
  m.lock();
  auto token = m.lost_token();
  SyncRedis(server.port()).cmd({"DEL", "dlock:{l5}"});
  try {
    m.lock();  // re-entry: the server has no hold for this owner any more
    FAIL() << "re-entry after loss must not silently re-acquire";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::lease_lost);
  }
  EXPECT_TRUE(token.stop_requested());
  EXPECT_FALSE(client.inspect("l5").value().held);
  m.unlock();  // the lost level: reported, not thrown
  EXPECT_EQ(m.last_release_status().code(), Errc::not_held);
  EXPECT_TRUE(m.try_lock()) << "after unlocking the lost level, a fresh grant works";
}

// A grant whose reply comes back after the lease's validity is no grant: the
// key may already have expired and gone to someone else. Here the server
// sleeps (DEBUG SLEEP) with the acquire queued, so its reply arrives 600 ms
// after the request for a 300 ms lease; with a command timeout above that,
// only the validity check stands between the caller and a stale grant.
TEST(LateGrant, ReplyAfterValidityIsUndoneAndRetried) {
  RedisServer server;
  LogSink log;
  ClientOptions options = quiet(log);
  options.command_timeout = 3000ms;
  Client client = Client::connect(server.url(), options);
  std::thread sleeper([&] { SyncRedis(server.port()).cmd({"DEBUG", "SLEEP", "0.6"}); });
  std::this_thread::sleep_for(100ms);  // the server is asleep now
  LockOptions lo;
  lo.lease = 300ms;
  auto t0 = Clock::now();
  auto lease = client.acquire("late", 5s, lo);
  sleeper.join();
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  EXPECT_EQ(client.stats().late_grants, 1u);
  EXPECT_GE(ms_since(t0), 450);
  // The second, timely grant is the one returned: it is valid now.
  EXPECT_GT(lease->valid_until(), Clock::now());
  EXPECT_EQ(lease->fence(), client.inspect("late")->last_fence) << "the newest fence: the late grant's came first";
}

// An acquire that gave up while the server was frozen may still be granted
// when the server wakes and reads it. Its cleanup could not be sent (the
// connection was dropped for silence and was reconnecting): it is sent
// again until the attempt's lease would have ended, so the name is free as
// soon as the server answers, not a whole lease later.
TEST(LateGrant, AGrantMadeAfterTheCallerGaveUpIsUndoneOnceTheServerAnswers) {
  RedisServer server;
  LogSink log;
  ClientOptions options = quiet(log);
  options.command_timeout = 300ms;  // the connection is dropped before the caller gives up
  Client client = Client::connect(server.url(), options);
  ASSERT_TRUE(client.try_acquire("frozen").value().release().ok());  // the connection is up
  server.pause();
  std::promise<Status> gave_up;
  // The I/O path (async): its request is written and waits in the socket.
  client.async_acquire("frozen", 1s, LockOptions{}, [&](Result<Lease> r) { gave_up.set_value(r.status()); });
  EXPECT_FALSE(gave_up.get_future().get().ok());
  std::this_thread::sleep_for(2s);
  server.resume();
  Client other = Client::connect(server.url(), quiet(log));
  auto t0 = Clock::now();
  auto got = other.acquire("frozen", 10s);  // the watchdog lease is 30 s
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_LT(ms_since(t0), 5000);
}

}  // namespace
}  // namespace dlock::test

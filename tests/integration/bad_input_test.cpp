// Bad input and broken servers: each a specific error, nothing left locked.
#include "integration/common.hpp"

namespace dlock::test {
namespace {

TEST(BadInput, MalformedUrls) {
  for (const char* url : {"", "127.0.0.1:6379", "http://127.0.0.1:6379", "redis://127.0.0.1:notaport",
                          "redis://127.0.0.1:6379?cacert=/x", "rediss://h?what=1", "redis://127.0.0.1:6379/db"}) {
    auto r = Client::try_connect(url);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_EQ(r.code(), Errc::invalid_argument) << url << ": " << r.status().to_string();
  }
  EXPECT_THROW(Client::connect("nonsense"), Error);
}

TEST(BadInput, ClosedPortIsUnavailableAndQuick) {
  int port = free_port();
  LogSink log;
  auto t0 = Clock::now();
  auto r = Client::try_connect("redis://127.0.0.1:" + std::to_string(port), quiet(log));
  EXPECT_EQ(r.code(), Errc::unavailable);
  EXPECT_EQ(r.status().next_step(), NextStep::retry);
  EXPECT_LT(ms_since(t0), 2000);
}

TEST(BadInput, BadClientOptions) {
  RedisServer server;
  ClientOptions o;
  o.command_timeout = 0ms;
  EXPECT_EQ(Client::try_connect(server.url(), o).code(), Errc::invalid_argument);
}

class BadLockInput : public ::testing::Test {
 protected:
  RedisServer server;
  LogSink log;
  Client client = Client::connect(server.url(), quiet(log));
};

TEST_F(BadLockInput, LeaseMustBePositive) {
  for (auto lease : {0ms, -5ms}) {
    LockOptions o;
    o.lease = lease;
    auto r = client.try_acquire("x", o);
    EXPECT_EQ(r.code(), Errc::invalid_argument);
  }
  LockOptions o;
  o.renew_interval = o.watchdog_lease;
  EXPECT_EQ(client.try_acquire("x", o).code(), Errc::invalid_argument);
  EXPECT_EQ(client.acquire("x", -1ms).code(), Errc::invalid_argument);
  EXPECT_FALSE(client.inspect("x").value().held);
}

TEST_F(BadLockInput, NamesAreValidated) {
  EXPECT_EQ(client.try_acquire("").code(), Errc::invalid_argument);
  EXPECT_EQ(client.try_acquire(std::string(513, 'n')).code(), Errc::invalid_argument);
  EXPECT_TRUE(client.try_acquire(std::string(512, 'n')).ok());
  Mutex m(client, "");
  EXPECT_THROW(m.lock(), Error);
  LockOptions o;
  o.owner = std::string(129, 'o');
  EXPECT_EQ(client.try_acquire("y", o).code(), Errc::invalid_argument);
}

TEST_F(BadLockInput, LockKeyHoldingAnotherTypeIsWrongTypeAndUntouched) {
  SyncRedis redis(server.port());
  redis.cmd({"SET", "dlock:{wt}", "someone's string"});
  auto r = client.try_acquire("wt");
  EXPECT_EQ(r.code(), Errc::wrong_type);
  EXPECT_EQ(r.status().next_step(), NextStep::give_up);
  EXPECT_EQ(redis.cmd({"GET", "dlock:{wt}"}), "someone's string");
  redis.cmd({"HSET", "dlock:{wt2}", "unrelated", "1"});
  EXPECT_EQ(client.try_acquire("wt2").code(), Errc::wrong_type);
  redis.cmd({"SET", "dlock:fence", "not-a-number"});
  EXPECT_EQ(client.try_acquire("wt3").code(), Errc::wrong_type);
  EXPECT_EQ(redis.integer({"EXISTS", "dlock:{wt3}"}), 0) << "no half-made lock";
  redis.cmd({"DEL", "dlock:fence"});
  EXPECT_TRUE(client.try_acquire("wt3").ok());
}

TEST_F(BadLockInput, LostReplyIsReportedUnknownAndCleanedUp) {
  // A client whose commands time out fast, against a server that stalls.
  auto o = quiet(log);
  o.command_timeout = 200ms;
  auto impatient = Client::connect(server.url(), o);
  std::thread staller([&] { SyncRedis(server.port()).cmd({"DEBUG", "SLEEP", "1"}); });
  std::this_thread::sleep_for(100ms);  // the server is now asleep
  LockOptions lo;
  lo.error_retry = 0ms;  // report the doubt instead of settling it
  auto r = impatient.try_acquire("doubt", lo);
  staller.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::outcome_unknown) << r.status().to_string();
  EXPECT_EQ(r.status().next_step(), NextStep::unknown);
  // The acquire may have run after the stall; the in-doubt cleanup undoes it.
  EXPECT_TRUE(eventually([&] { return !client.inspect("doubt").value().held; }, 3s));
  EXPECT_TRUE(client.try_acquire("doubt").ok());
}

TEST_F(BadLockInput, ShortStallIsSettledByRetrying) {
  auto o = quiet(log);
  o.command_timeout = 200ms;
  auto impatient = Client::connect(server.url(), o);
  std::thread staller([&] { SyncRedis(server.port()).cmd({"DEBUG", "SLEEP", "0.5"}); });
  std::this_thread::sleep_for(100ms);
  auto r = impatient.try_acquire("settled");  // error_retry 2 s covers the stall
  staller.join();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto info = client.inspect("settled").value();
  EXPECT_TRUE(info.held);
  EXPECT_EQ(info.reentry_count, 1u) << "the replayed acquire was not applied twice";
  EXPECT_TRUE(r->release().ok());
  EXPECT_FALSE(client.inspect("settled").value().held);
}

TEST_F(BadLockInput, RedisRestartedWhileAWaiterWaits) {
  auto holder = client.try_acquire("rs", fast_watchdog(30000ms, 10000ms)).value();
  std::atomic<int> code{-1};
  std::thread waiter([&] {
    LogSink wlog;
    auto c2 = Client::connect(server.url(), quiet(wlog));
    auto r = c2.acquire("rs", 10s);
    code = static_cast<int>(r.code());
  });
  std::this_thread::sleep_for(300ms);
  server.stop();
  server.start();  // no persistence: the holder's key is gone
  waiter.join();
  // The waiter must not hang for the 30 s lease: its subscription dropped,
  // it retried, and the lock was free on the restarted server.
  EXPECT_EQ(code.load(), static_cast<int>(Errc::ok));
}

TEST_F(BadLockInput, OperationsOnAStoppedServerFailRetryably) {
  server.stop();
  auto r = client.try_acquire("down");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.code() == Errc::unavailable || r.code() == Errc::outcome_unknown) << r.status().to_string();
  EXPECT_NE(r.status().next_step(), NextStep::give_up);
}

}  // namespace
}  // namespace dlock::test

// A crowd on one Redis name (the dlock layout's plain lock): a release wakes
// the first queued waiter alone and keeps the lock for it a moment, so that
// neither the herd nor the releaser's own next call gets in first; a woken
// waiter that is gone, gives up or never comes passes its turn on.

#include "integration/common.hpp"

namespace dlock::test {
namespace {

std::string waiters_key(const std::string& name) { return "dlock:{" + name + "}:w"; }

std::vector<std::string> queued(SyncRedis& r, const std::string& name) {
  return reply_lines(r.cmd({"ZRANGE", waiters_key(name), "0", "-1"}));
}

// Waiting clients listening on the name (each on its own channel).
std::size_t listening(SyncRedis& r, const std::string& name) {
  const std::string reply = r.cmd({"PUBSUB", "CHANNELS", "dlock:{" + name + "}:wake:*"});
  return reply_lines(reply).size();
}

// A woken waiter that never comes (paused: its connection is up, it does
// not act): the one behind it, told to stand by, takes the lock once the
// reservation ends.
TEST(RedisCrowd, AWokenWaiterThatNeverComesPassesItsTurnAfterTheReservation) {
  RedisServer server;
  LogSink log;
  Client holder = Client::connect(server.url(), quiet(log));
  Client waiter = Client::connect(server.url(), quiet(log));
  auto lease = holder.try_acquire("p").value();
  // The paused waiter: subscribed on its channel, first in the queue.
  SyncRedis paused(server.port());
  paused.cmd({"SUBSCRIBE", "dlock:{p}:wake:paused"});
  SyncRedis r(server.port());
  r.cmd({"ZADD", waiters_key("p"), "0", "paused:1"});
  std::promise<Result<Lease>> got;
  auto got_f = got.get_future();
  waiter.async_acquire("p", 20s, {}, [&](Result<Lease> x) { got.set_value(std::move(x)); });
  ASSERT_TRUE(eventually([&] { return queued(r, "p").size() == 2 && listening(r, "p") == 2; }, 5s));
  const auto t0 = Clock::now();
  ASSERT_TRUE(lease.release().ok());
  ASSERT_EQ(got_f.wait_for(5s), std::future_status::ready);
  auto x = got_f.get();
  ASSERT_TRUE(x.ok()) << x.status().to_string();
  EXPECT_LT(ms_since(t0), 2000) << "granted at the reservation's end, not the holder's lease";
  EXPECT_TRUE(queued(r, "p").empty());
}

// A queued waiter whose client is gone (nobody listens on its channel) is
// skipped at once.
TEST(RedisCrowd, AQueuedWaiterWhoseClientIsGoneIsSkipped) {
  RedisServer server;
  LogSink log;
  Client holder = Client::connect(server.url(), quiet(log));
  Client waiter = Client::connect(server.url(), quiet(log));
  auto lease = holder.try_acquire("g").value();
  SyncRedis r(server.port());
  r.cmd({"ZADD", waiters_key("g"), "0", "gone:1"});
  std::promise<Result<Lease>> got;
  auto got_f = got.get_future();
  waiter.async_acquire("g", 20s, {}, [&](Result<Lease> x) { got.set_value(std::move(x)); });
  ASSERT_TRUE(eventually([&] { return queued(r, "g").size() == 2 && listening(r, "g") == 1; }, 5s));
  ASSERT_TRUE(lease.release().ok());
  ASSERT_EQ(got_f.wait_for(3s), std::future_status::ready);
  auto x = got_f.get();
  ASSERT_TRUE(x.ok()) << x.status().to_string();
  EXPECT_EQ(r.cmd({"EXISTS", "dlock:{g}:r"}), "0") << "no reservation left for the one skipped";
  EXPECT_TRUE(queued(r, "g").empty());
}

// A waiter that gives up leaves the queue: the next release does not wake
// (and wait out a reservation for) a waiter that is gone.
TEST(RedisCrowd, AWaiterThatGivesUpLeavesTheQueue) {
  RedisServer server;
  LogSink log;
  Client holder = Client::connect(server.url(), quiet(log));
  Client quitter = Client::connect(server.url(), quiet(log));
  Client waiter = Client::connect(server.url(), quiet(log));
  auto lease = holder.try_acquire("q").value();
  Mutex mq(quitter, "q");
  std::thread quits([&] { EXPECT_FALSE(mq.try_lock_for(300ms)); });
  SyncRedis r(server.port());
  ASSERT_TRUE(eventually([&] { return queued(r, "q").size() == 1; }, 5s));
  std::promise<Result<Lease>> got;
  auto got_f = got.get_future();
  waiter.async_acquire("q", 20s, {}, [&](Result<Lease> x) { got.set_value(std::move(x)); });
  quits.join();
  ASSERT_TRUE(eventually([&] { return queued(r, "q").size() == 1 && listening(r, "q") == 1; }, 5s))
      << "the quitter left, the waiter stays";
  ASSERT_TRUE(lease.release().ok());
  ASSERT_EQ(got_f.wait_for(3s), std::future_status::ready);
  EXPECT_TRUE(got_f.get().ok());
}

// A fair lock's hand-over goes to its recipient's client alone: no waiter
// listens on the name's own channel, and the recipient is granted by the
// message, without another command.
TEST(RedisCrowd, AHandOverIsSentToItsRecipientAlone) {
  RedisServer server;
  LogSink log;
  LockOptions fair;
  fair.fair = true;
  Client holder = Client::connect(server.url(), quiet(log));
  auto lease = holder.try_acquire("h", fair).value();
  constexpr int kWaiters = 10;
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::future<Result<Lease>>> got;
  for (int i = 0; i < kWaiters; ++i) {
    clients.push_back(std::make_unique<Client>(Client::connect(server.url(), quiet(log))));
    auto p = std::make_shared<std::promise<Result<Lease>>>();
    got.push_back(p->get_future());
    clients.back()->async_acquire("h", 60s, fair, [p](Result<Lease> r) { p->set_value(std::move(r)); });
  }
  SyncRedis r(server.port());
  ASSERT_TRUE(eventually([&] { return holder.inspect("h").value().waiters.value_or(0) == kWaiters; }, 5s));
  ASSERT_TRUE(eventually([&] { return listening(r, "h") == kWaiters; }, 5s));
  const std::string numsub = r.cmd({"PUBSUB", "NUMSUB", "dlock:{h}:wake"});
  EXPECT_EQ(numsub.substr(numsub.find('\n') + 1), "0") << "a waiter listens where every hand-over was told";
  std::this_thread::sleep_for(200ms);
  std::vector<std::uint64_t> sent;
  for (const auto& c : clients) sent.push_back(c->stats().commands_sent);
  ASSERT_TRUE(lease.release().ok());
  int granted = -1;
  ASSERT_TRUE(eventually(
      [&] {
        for (int i = 0; i < kWaiters; ++i)
          if (got[i].valid() && got[i].wait_for(0s) == std::future_status::ready) granted = i;
        return granted >= 0;
      },
      3s));
  auto next = got[granted].get();
  ASSERT_TRUE(next.ok()) << next.status().to_string();
  // Its UNSUBSCRIBE only: no acquire went out.
  EXPECT_LE(clients[granted]->stats().commands_sent, sent[granted] + 1) << "granted by the hand-over's message alone";
  EXPECT_TRUE(next->release().ok());
}

}  // namespace
}  // namespace dlock::test

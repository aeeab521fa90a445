// The wake path's lifetime cases, driven deterministically: a release
// delivered to a waiter whose deadline has already passed, and a wake-up
// passed on when the woken waiter gives up.
//
// The trick: an async completion runs on the client's I/O thread, so a
// completion that sleeps holds that thread while the test arranges what the
// thread will find when it wakes (a release message already on the socket,
// a wait deadline already past). Asio hands out socket completions before
// expired timers in one reactor pass, so the release reaches the waiter
// before its own deadline timer does.
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <future>

#include "backend.hpp"
#include "integration/common.hpp"
#include "redis/redis_backend.hpp"

namespace dlock::test {
namespace {

// Blocks `client`'s I/O thread until the returned promise is set.
std::shared_ptr<std::promise<void>> block_io_thread(const Client& client) {
  auto gate = std::make_shared<std::promise<void>>();
  auto entered = std::make_shared<std::promise<void>>();
  auto entered_f = entered->get_future();
  client.async_acquire("io-blocker", 0ms, {}, [gate, entered](Result<Lease> r) {
    entered->set_value();
    gate->get_future().wait();
    if (r.ok()) r->lost();  // the lease is released in the background on the I/O thread
  });
  entered_f.wait();
  return gate;
}

// Channels of the name with a subscriber: its own (observers, a line's
// waiters) and each waiting client's.
size_t subscribers(RedisServer& server, const std::string& name) {
  SyncRedis r(server.port());
  const std::string reply = r.cmd({"PUBSUB", "CHANNELS", "dlock:{" + name + "}:wake*"});
  return reply_lines(reply).size();
}

TEST(WakePath, ReleaseReachesAWaiterWhoseDeadlinePassed) {
  RedisServer server;
  LogSink log;
  Client holder = Client::connect(server.url(), quiet(log));
  Client waiter = Client::connect(server.url(), quiet(log));
  auto lease = holder.try_acquire("x").value();

  std::promise<Result<Lease>> got;
  auto got_f = got.get_future();
  waiter.async_acquire("x", 40ms, {}, [&](Result<Lease> r) { got.set_value(std::move(r)); });
  ASSERT_TRUE(eventually([&] { return subscribers(server, "x") == 1; }, 2s)) << "the waiter subscribed";

  auto gate = block_io_thread(waiter);
  std::this_thread::sleep_for(60ms);  // the wait's deadline passes, unseen
  ASSERT_TRUE(lease.release().ok());  // the release message waits on the socket
  std::this_thread::sleep_for(20ms);
  gate->set_value();

  ASSERT_EQ(got_f.wait_for(5s), std::future_status::ready);
  auto r = got_f.get();
  // Either outcome is correct (the deadline passed; a grant is fine too); a
  // crash or a hang is not.
  if (!r.ok()) {
    EXPECT_EQ(r.code(), Errc::timeout) << r.status().to_string();
  }
  EXPECT_TRUE(eventually([&] { return subscribers(server, "x") == 0; }, 2s)) << "the waiter unsubscribed";
}

TEST(WakePath, AWakeUpIsPassedOnWhenTheWokenWaiterTimesOut) {
  RedisServer server;
  LogSink log;
  Client holder = Client::connect(server.url(), quiet(log));
  Client waiter = Client::connect(server.url(), quiet(log));
  auto lease = holder.try_acquire("y").value();

  // The first waiter's wait runs out, the second one's does not: the one
  // release must still reach the second.
  std::promise<Result<Lease>> first, second;
  auto first_f = first.get_future(), second_f = second.get_future();
  waiter.async_acquire("y", 40ms, {}, [&](Result<Lease> r) { first.set_value(std::move(r)); });
  ASSERT_TRUE(eventually([&] { return subscribers(server, "y") == 1; }, 2s));
  waiter.async_acquire("y", 10s, {}, [&](Result<Lease> r) { second.set_value(std::move(r)); });
  std::this_thread::sleep_for(50ms);  // both wait (one subscription per client)

  auto gate = block_io_thread(waiter);
  std::this_thread::sleep_for(60ms);
  ASSERT_TRUE(lease.release().ok());
  std::this_thread::sleep_for(20ms);
  const auto released_at = Clock::now();
  gate->set_value();

  ASSERT_EQ(first_f.wait_for(5s), std::future_status::ready);
  ASSERT_EQ(second_f.wait_for(5s), std::future_status::ready);
  auto r2 = second_f.get();
  ASSERT_TRUE(r2.ok()) << r2.status().to_string();
  EXPECT_LT(ms_since(released_at), 2000) << "woken by the release, not by polling";
}

// Two waiters of one owner: the release wakes one, whose grant lets the
// other re-enter at once (not at the holder's lease).
TEST(WakePath, WaitersSharingAnOwnerAreBothServedByOneRelease) {
  RedisServer server;
  LogSink log;
  Client holder = Client::connect(server.url(), quiet(log));
  Client waiter = Client::connect(server.url(), quiet(log));
  auto lease = holder.try_acquire("z").value();  // 30 s watchdog lease
  LockOptions shared;
  shared.owner = "one-owner";
  std::promise<Result<Lease>> a, b;
  auto af = a.get_future(), bf = b.get_future();
  waiter.async_acquire("z", 20s, shared, [&](Result<Lease> r) { a.set_value(std::move(r)); });
  waiter.async_acquire("z", 20s, shared, [&](Result<Lease> r) { b.set_value(std::move(r)); });
  ASSERT_TRUE(eventually([&] { return subscribers(server, "z") == 1; }, 2s));
  std::this_thread::sleep_for(50ms);
  const auto t0 = Clock::now();
  ASSERT_TRUE(lease.release().ok());
  ASSERT_EQ(af.wait_for(5s), std::future_status::ready);
  ASSERT_EQ(bf.wait_for(5s), std::future_status::ready);
  auto ra = af.get(), rb = bf.get();
  ASSERT_TRUE(ra.ok()) << ra.status().to_string();
  ASSERT_TRUE(rb.ok()) << rb.status().to_string();
  EXPECT_LT(ms_since(t0), 2000);
  EXPECT_EQ(std::max(ra->reentry_count(), rb->reentry_count()), 2u);
}

// The Redis backend alone, on a loop of the test's own: a name watched,
// unwatched and watched again in one go, as a waiter that is granted and
// waits again before its UNSUBSCRIBE is answered. The third call must send
// a SUBSCRIBE of its own (one is not in flight: the newest is the
// UNSUBSCRIBE), or its ready never comes and the waiter waits forever.
TEST(WakePath, AWatchMadeAgainBehindItsUnsubscribeIsSubscribed) {
  RedisServer server;
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  redis::ConnectionConfig config;
  config.endpoint = detail::parse_redis_url(server.url()).value();
  config.log = [](LogLevel, std::string_view) {};
  auto backend = redis::make_redis_backend(io, config, "dlock:");
  std::atomic<int> released{0};
  detail::BackendEvents events;
  events.released = [&](const detail::WatchKey& key) {
    if (key.name == "x") ++released;
  };
  backend->set_events(std::move(events));
  std::thread loop([&] { io.run(); });
  auto on_loop = [&](std::function<void(std::function<void(Status)>)> call) {
    auto p = std::make_shared<std::promise<Status>>();
    auto f = p->get_future();
    boost::asio::post(io, [call = std::move(call), p] { call([p](Status s) { p->set_value(std::move(s)); }); });
    return f.wait_for(5s) == std::future_status::ready ? f.get() : Status(Errc::timeout, "no answer in 5 s");
  };
  ASSERT_TRUE(on_loop([&](auto done) { backend->start(std::move(done)); }).ok());
  // The subscription connection up, so the calls below go out at once.
  ASSERT_TRUE(on_loop([&](auto done) { backend->watch({"warm", 0, true}, std::move(done)); }).ok());
  const Status again = on_loop([&](auto done) {
    backend->watch({"x", 0, true}, [](Status) {});
    backend->unwatch({"x", 0, true});
    backend->watch({"x", 0, true}, std::move(done));
  });
  EXPECT_TRUE(again.ok()) << again.to_string();
  EXPECT_TRUE(eventually([&] { return subscribers(server, "x") == 1; }, 2s));
  SyncRedis(server.port()).cmd({"PUBLISH", "dlock:{x}:wake", "1"});
  EXPECT_TRUE(eventually([&] { return released.load() == 1; }, 2s)) << "the release message was not heard";
  (void)on_loop([&](auto done) {
    backend->close();
    done({});
  });
  work.reset();
  loop.join();
}

}  // namespace
}  // namespace dlock::test

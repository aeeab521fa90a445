// The asynchronous API: callbacks and Asio completion tokens.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <dlock/asio.hpp>
#include <future>

#include "integration/common.hpp"

namespace dlock::test {
namespace {

class AsyncTest : public ::testing::Test {
 protected:
  RedisServer server;
  LogSink log;
  Client client = Client::connect(server.url(), quiet(log));
};

TEST_F(AsyncTest, Callbacks) {
  std::promise<std::uint64_t> fence;
  client.async_acquire("c1", 1s, {}, [&](Result<Lease> r) {
    ASSERT_TRUE(r.ok());
    auto f = r->fence();
    // Blocking calls on the I/O thread are refused, not deadlocked.
    EXPECT_EQ(client.try_acquire("other").code(), Errc::precondition_failed);
    EXPECT_EQ(client.try_acquire("other").status().next_step(), NextStep::give_up);
    client.async_release(std::move(r.value()), [&, f](Status s) {
      EXPECT_TRUE(s.ok());
      fence.set_value(f);
    });
  });
  EXPECT_GT(fence.get_future().get(), 0u);
  EXPECT_FALSE(client.inspect("c1").value().held);
}

TEST_F(AsyncTest, UseFuture) {
  auto f = async_acquire(client, "c2", 1s, {}, boost::asio::use_future);
  Lease lease = f.get();
  EXPECT_TRUE(lease.held());
  auto busy = async_acquire(client, "c2", 0ms, {}, boost::asio::use_future);
  try {
    busy.get();
    FAIL() << "expected busy";
  } catch (const boost::system::system_error& e) {
    EXPECT_TRUE(e.code() == make_error_code(Errc::busy)) << e.what();
  }
  async_release(client, std::move(lease), boost::asio::use_future).get();
  EXPECT_FALSE(client.inspect("c2").value().held);
}

TEST_F(AsyncTest, CoAwaitOnTheCallersExecutor) {
  boost::asio::io_context io;
  std::uint64_t fence = 0;
  bool ran_on_io = false;
  boost::system::error_code wrong;
  SyncRedis(server.port()).cmd({"SET", "dlock:{c3-bad}", "x"});
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        // Named arguments: GCC 12 miscompiles some temporaries inside a
        // co_await expression (double destruction), whatever the callee.
        std::string name = "c3";
        LockOptions options;
        Lease lease =
            co_await async_acquire(client, name, std::chrono::milliseconds(1000), options, boost::asio::use_awaitable);
        ran_on_io = io.get_executor().running_in_this_thread();
        fence = lease.fence();
        co_await async_release(client, std::move(lease), boost::asio::use_awaitable);
        try {
          std::string bad = "c3-bad";
          co_await async_acquire(client, bad, std::chrono::milliseconds(0), options, boost::asio::use_awaitable);
        } catch (const boost::system::system_error& e) {
          wrong = e.code();
        }
      },
      boost::asio::detached);
  io.run();  // returns once the coroutine is done: pending work was tracked
  EXPECT_GT(fence, 0u);
  EXPECT_TRUE(ran_on_io);
  EXPECT_TRUE(wrong == make_error_code(Errc::wrong_type)) << wrong.message();
  EXPECT_FALSE(client.inspect("c3").value().held);
}

TEST_F(AsyncTest, ManyConcurrentWaitersOnOneLockAreAllServed) {
  constexpr int kOps = 50;
  std::atomic<int> done{0}, inside{0}, overlap{0};
  std::promise<void> all;
  std::function<void(int)> start = [&](int i) {
    client.async_acquire("c4", 10s, {}, [&](Result<Lease> r) {
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      if (++inside > 1) ++overlap;
      --inside;
      client.async_release(std::move(r.value()), [&](Status s) {
        EXPECT_TRUE(s.ok());
        if (++done == kOps) all.set_value();
      });
    });
    (void)i;
  };
  for (int i = 0; i < kOps; ++i) start(i);
  ASSERT_EQ(all.get_future().wait_for(20s), std::future_status::ready);
  EXPECT_EQ(overlap.load(), 0);
}

}  // namespace
}  // namespace dlock::test

namespace dlock::test {
namespace {

TEST(AsyncErrors, AThrowingCallbackIsReportedAndTheClientKeepsWorking) {
  RedisServer server;
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  std::promise<void> threw;
  client.async_acquire("boom", 0ms, {}, [&](Result<Lease> r) {
    ASSERT_TRUE(r.ok());
    threw.set_value();
    throw std::runtime_error("user bug");
  });
  threw.get_future().wait();
  EXPECT_TRUE(eventually([&] { return log.contains("user bug"); }, 2s));
  // The lease in the callback was dropped on the I/O thread: released in the
  // background. The client still serves.
  EXPECT_TRUE(eventually([&] { return client.try_acquire("boom").ok(); }, 2s));
}

}  // namespace
}  // namespace dlock::test

// The lock contract every backend keeps, one suite run against each: Redis,
// Redlock (three masters), SQLite, PostgreSQL, ZooKeeper and the in-memory
// fake. A new backend joins by adding its environment to kBackends.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <dlock/dlock.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend_envs.hpp"
#include "client_core.hpp"
#include "support/fake_backend.hpp"
#include "support/postgres_server.hpp"
#include "support/redis_server.hpp"
#include "support/status_matchers.hpp"
#include "support/temp_dir.hpp"
#include "support/zookeeper_server.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using ::testing::Gt;

class LockContract : public ::testing::TestWithParam<Backend> {
 protected:
  std::unique_ptr<BackendEnv> env = GetParam().make();
  Client client = env->client();
};

LockOptions fixed(std::chrono::milliseconds lease) {
  LockOptions o;
  o.lease = lease;
  return o;
}

using Clock = std::chrono::steady_clock;

// The lock can be taken and released again within a few seconds.
bool eventually_ok(const std::function<Result<Lease>()>& acquire) {
  auto got = acquire();
  return got.ok() && got->release().ok();
}

LockOptions owner(const std::string& id) {
  LockOptions o;
  o.owner = id;
  return o;
}

TEST_P(LockContract, AGrantIsVisibleAndItsReleaseFreesTheLock) {
  auto lease = client.acquire("c", 0ms);
  ASSERT_THAT(lease, IsOk());
  if (env->every_grant_fenced()) {
    EXPECT_THAT(lease->fence(), Gt(0u));
  }
  auto info = client.inspect("c");
  ASSERT_THAT(info, IsOk());
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->reentry_count, 1u);
  EXPECT_THAT(lease->release(), IsOk());
  EXPECT_FALSE(client.inspect("c")->held);
}

// Every command is counted, those sent on the caller's own thread too (the
// blocking fast path: 0 on SQLite and PostgreSQL with one client, once).
TEST_P(LockContract, EveryCommandIsCountedTheCallersOwnToo) {
  const auto before = client.stats().commands_sent;
  for (int i = 0; i < 3; ++i) {
    auto lease = client.try_acquire("counted");
    ASSERT_THAT(lease, IsOk());
    EXPECT_THAT(lease->release(), IsOk());
  }
  EXPECT_GE(client.stats().commands_sent, before + 6) << "three acquires and three releases";
}

// Who holds a lock, and since when: every grant stores "PROGRAM[PID]@HOST"
// (the label replacing the program), inspect and list read it back, and
// list finds locks by name prefix, glob and brace characters included.
TEST_P(LockContract, InspectAndListNameTheHolderAndHowLongItHeld) {
  LockOptions o;
  o.holder_label = "nightly-report";
  auto a = client.acquire("who/a", 0ms, o);
  ASSERT_THAT(a, IsOk());
  auto odd = client.acquire("who/{x}*?[%]", 0ms);
  ASSERT_THAT(odd, IsOk());
  auto other = client.acquire("other", 0ms);
  ASSERT_THAT(other, IsOk());
  auto info = client.inspect("who/a");
  ASSERT_THAT(info, IsOk());
  const std::string me = "[" + std::to_string(::getpid()) + "]@";
  EXPECT_TRUE(info->holder.starts_with("nightly-report" + me)) << info->holder;
  if (info->held_for) {
    EXPECT_LT(*info->held_for, 10s);
  } else {
    EXPECT_TRUE(env->session_held()) << "only ZooKeeper cannot tell how long a lock was held";
  }
  const std::string program = client.inspect("other")->holder;
  EXPECT_NE(program.find(me), std::string::npos) << "the program's own name by default: " << program;

  auto who = client.list("who/");
  ASSERT_THAT(who, IsOk());
  ASSERT_EQ(who->size(), 2u);
  EXPECT_EQ((*who)[0].name, "who/a");
  EXPECT_EQ((*who)[0].info.holder, info->holder);
  EXPECT_EQ((*who)[1].name, "who/{x}*?[%]");
  EXPECT_EQ((*who)[1].info.fence, odd->fence());
  auto braces = client.list("who/{");
  ASSERT_THAT(braces, IsOk());
  ASSERT_EQ(braces->size(), 1u) << "a prefix is literal, not a pattern";
  auto all = client.list();
  ASSERT_THAT(all, IsOk());
  EXPECT_EQ(all->size(), 3u);
  ASSERT_THAT(a->release(), IsOk());
  auto after = client.list("who/");
  ASSERT_THAT(after, IsOk());
  ASSERT_EQ(after->size(), 1u) << "a released lock is not listed";
}

// An application can keep its grants anonymous, and still name one.
TEST_P(LockContract, ADescriptionCanBeTurnedOff) {
  if (env->url().empty()) GTEST_SKIP() << "no URL to connect a second client with other options";
  ClientOptions opts = quiet();
  opts.describe_holder = false;
  auto anonymous = Client::connect(env->url(), opts);
  auto a = anonymous.acquire("anon", 0ms);
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(client.inspect("anon")->holder, "");
  LockOptions named;
  named.holder = "job 42";
  auto b = anonymous.acquire("named", 0ms, named);
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(client.inspect("named")->holder, "job 42");
}

TEST_P(LockContract, AnotherOwnerIsRefusedWhileItIsHeld) {
  auto a = client.acquire("c", 0ms);
  ASSERT_THAT(a, IsOk());
  EXPECT_THAT(client.try_acquire("c"), StatusIs(Errc::busy));
  EXPECT_THAT(client.acquire("c", 50ms), StatusIs(Errc::timeout));
  Client other = env->client();
  EXPECT_THAT(other.try_acquire("c"), StatusIs(Errc::busy));
}

TEST_P(LockContract, FencesIncreaseFromGrantToGrant) {
  std::uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    auto lease = client.acquire("c", 0ms);
    ASSERT_THAT(lease, IsOk());
    if (env->every_grant_fenced() || lease->fence() != 0) {
      EXPECT_THAT(lease->fence(), Gt(last));
      last = lease->fence();
    }
    ASSERT_THAT(lease->release(), IsOk());
  }
}

TEST_P(LockContract, TheSameOwnerReentersAndFreesAtTheLastRelease) {
  auto a = client.acquire("c", 0ms, owner("me"));
  auto b = client.acquire("c", 0ms, owner("me"));
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(b->reentry_count(), 2u);
  EXPECT_EQ(a->fence(), b->fence()) << "one grant";
  ASSERT_THAT(b->release(), IsOk());
  EXPECT_TRUE(client.inspect("c")->held);
  EXPECT_THAT(client.try_acquire("c"), StatusIs(Errc::busy));
  ASSERT_THAT(a->release(), IsOk());
  EXPECT_FALSE(client.inspect("c")->held);
}

TEST_P(LockContract, AWaiterGetsTheLockWhenItIsReleased) {
  auto holder = client.acquire("c", 0ms);  // 30 s watchdog lease: only a release frees it in time
  ASSERT_THAT(holder, IsOk());
  Client other = env->client();
  auto waiter = std::async(std::launch::async, [&] { return other.acquire("c", 20s); });
  std::this_thread::sleep_for(100ms);
  ASSERT_THAT(holder->release(), IsOk());
  auto got = waiter.get();
  EXPECT_THAT(got, IsOk());
}

// Clients taking turns on one name, each waiting while another holds it:
// every wait must end by a release. The leases (30 s watchdog) outlast the
// waits (20 s), so a waiter that missed its wake-up fails rather than being
// rescued by a lease. A waiter's subscription is dropped and made again
// between turns, often while the last one's unsubscribe is in flight.
TEST_P(LockContract, ClientsTakingTurnsAreEachWokenByARelease) {
  constexpr int kClients = 4, kTurns = 50;
  std::vector<Client> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(env->client());
  std::atomic<int> failures{0};
  std::string first_failure;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (auto& c : clients)
    threads.emplace_back([&, &c = c] {
      for (int t = 0; t < kTurns; ++t) {
        auto lease = c.acquire("turns", 20s);
        Status s = lease.ok() ? lease->release() : lease.status();
        if (!s.ok() && failures.fetch_add(1) == 0) {
          std::lock_guard lk(mu);
          first_failure = s.to_string();
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
}

// The holder and the waiter share one client (its fast path and its I/O
// thread): the release must still wake the waiter.
TEST_P(LockContract, AWaiterOfTheSameClientGetsTheLockWhenItIsReleased) {
  auto holder = client.acquire("c", 0ms);
  ASSERT_THAT(holder, IsOk());
  auto waiter = std::async(std::launch::async, [&] { return client.acquire("c", 20s); });
  std::this_thread::sleep_for(100ms);
  ASSERT_THAT(holder->release(), IsOk());
  EXPECT_THAT(waiter.get(), IsOk());
}

TEST_P(LockContract, AFixedLeaseExpiresAndItsLossIsReported) {
  if (env->session_held()) {
    EXPECT_THAT(client.acquire("c", 0ms, fixed(100ms)), StatusIs(Errc::invalid_argument));
    return;
  }
  auto a = client.acquire("c", 0ms, fixed(100ms));
  ASSERT_THAT(a, IsOk());
  auto b = client.acquire("c", 5s);  // granted once the lease ran out
  ASSERT_THAT(b, IsOk());
  if (env->every_grant_fenced() || (a->fence() != 0 && b->fence() != 0)) {
    EXPECT_THAT(b->fence(), Gt(a->fence()));
  }
  EXPECT_TRUE(a->lost());
  EXPECT_TRUE(a->lost_token().stop_requested());
  const Status late = a->release();
  EXPECT_TRUE(late.code() == Errc::not_owner || late.code() == Errc::not_held) << late.to_string();
  EXPECT_TRUE(client.inspect("c")->held) << "the late release left the new holder alone";
}

TEST_P(LockContract, AReleasedLeaseCannotBeReleasedAgain) {
  auto a = client.acquire("c", 0ms);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(a->release(), IsOk());
  EXPECT_THAT(a->release(), StatusIs(Errc::not_held));
}

TEST_P(LockContract, BadInputIsRefusedBeforeAnyIo) {
  EXPECT_THAT(client.try_acquire(""), StatusIs(Errc::invalid_argument));
  EXPECT_THAT(client.try_acquire("c", fixed(0ms)), StatusIs(Errc::invalid_argument));
  EXPECT_THAT(client.try_acquire("c", fixed(-5ms)), StatusIs(Errc::invalid_argument));
  EXPECT_THAT(client.acquire("c", -1ms), StatusIs(Errc::invalid_argument));
  EXPECT_FALSE(client.inspect("c")->held);
}

// A NUL cuts a name short in libpq and in C strings: "a\0b" and "a\0c"
// would be one lock on PostgreSQL and two on Redis. Refused everywhere, so a
// name means the same on every backend.
TEST_P(LockContract, ANameOrOwnerWithANulIsRefusedOnEveryBackend) {
  const std::string nul_name("a\0b", 3);
  EXPECT_THAT(client.try_acquire(nul_name), StatusIs(Errc::invalid_argument));
  EXPECT_THAT(client.acquire(nul_name, 10ms), StatusIs(Errc::invalid_argument));
  EXPECT_THAT(client.inspect(nul_name), StatusIs(Errc::invalid_argument));
  EXPECT_THAT(client.try_acquire("a", owner(std::string("m\0e", 3))), StatusIs(Errc::invalid_argument));
  EXPECT_FALSE(client.inspect("a")->held);
}

// Threads sharing one Mutex share its ownership: they re-enter one another's
// levels. Fast-path grants and releases on the callers' threads race with
// re-entries through the I/O thread; every level must still be counted once
// on both sides, no lease reported lost, nothing left behind.
TEST_P(LockContract, ThreadsSharingOneMutexCountEveryLevelOnce) {
  Mutex m(client, "c");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 40; ++i) {
        try {
          if (!m.try_lock_for(5s) || !m.release().ok()) ++failures;
        } catch (const std::exception&) {
          ++failures;
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(m.held(), 0u);
  EXPECT_FALSE(client.inspect("c")->held) << "a level was left on the server";
  EXPECT_EQ(client.stats().leases_lost, 0u);
  EXPECT_EQ(client.stats().release_failures, 0u);
}

TEST_P(LockContract, ClosingAClientFreesWhatItHeld) {
  {
    Client first = env->client();
    ASSERT_THAT(first.acquire("c", 0ms, owner("me")), IsOk());
    ASSERT_THAT(first.acquire("c", 0ms, owner("me")), IsOk());  // two levels, both freed
  }
  EXPECT_THAT(client.try_acquire("c"), IsOk());
}

// A client closed while calls wait in a hold's queue behind one the silent
// server has not answered (a re-entry; behind it the cleanup of its timed-out
// wait and a release): every queued call still ends, the release with an
// error, and nothing they captured stays alive (ASan's leak check: a queued
// call held its hold, which held the queue).
TEST_P(LockContract, ClosingAClientEndsTheCallsQueuedBehindASilentServer) {
  LockOptions o = owner("q");
  o.watchdog_lease = 1s;  // what the frozen server never heard frees the lock soon
  o.renew_interval = 300ms;
  std::promise<Status> released;
  auto released_future = released.get_future();
  {
    Client closing = env->client();
    auto held = closing.acquire("q", 0ms, o);
    ASSERT_THAT(held, IsOk());
    if (!env->freeze(true)) GTEST_SKIP() << "this backend's server cannot be frozen";
    std::promise<Status> reentered;
    closing.async_acquire("q", 100ms, o, [&](Result<Lease> r) { reentered.set_value(r.status()); });
    closing.async_release(std::move(*held), [&](Status s) { released.set_value(std::move(s)); });
    auto reentry = reentered.get_future();
    ASSERT_EQ(reentry.wait_for(5s), std::future_status::ready) << "a 100 ms wait did not end";
    if (reentry.get().ok()) {  // ZooKeeper: the client counts re-entries, nothing queued
      env->freeze(false);
      // The re-entry's lease, dropped in its callback on the I/O thread, may
      // outlive this client's handle there: the release ends on that thread
      // and must have ended before its promise goes.
      EXPECT_EQ(released_future.wait_for(10s), std::future_status::ready);
      GTEST_SKIP() << "this backend's re-entry does not reach the server";
    }
  }  // closed with the server still frozen
  const bool ended = released_future.wait_for(10s) == std::future_status::ready;
  env->freeze(false);
  ASSERT_TRUE(ended) << "a release queued when the client closed never ended";
  EXPECT_FALSE(released_future.get().ok()) << "a release the frozen server never saw reported done";
  if (!env->session_held()) {
    EXPECT_TRUE(eventually_ok([&] { return client.acquire("q", 10s); }));
  }
}

// A server alive but silent (SIGSTOP; SQLite: another connection holds the
// write lock). Every blocking call returns by its deadline: a wait at its
// end, a try (wait 0) within command_timeout or error_retry, the longer
// (2 s by default). A Mutex's timed try says false, as for contention: the server
// did not answer in time, it is not known to be down.
TEST_P(LockContract, EveryBlockingCallReturnsByItsDeadlineWhileTheServerIsFrozen) {
  auto warm = client.acquire("d", 0ms);  // connections open, the lock's node exists
  ASSERT_THAT(warm, IsOk());
  ASSERT_THAT(warm->release(), IsOk());
  if (!env->freeze(true)) GTEST_SKIP() << "this backend's server cannot be frozen";
  constexpr auto kSlack = 200ms;  // the deadline plus a few ms, on a busy machine
  auto since = [](Clock::time_point t) { return std::chrono::duration_cast<milliseconds>(Clock::now() - t); };
  auto t = Clock::now();
  auto waited = client.acquire("d", 1s);
  const auto acquire_took = since(t);
  Mutex mutex(client, "d");
  t = Clock::now();
  bool locked = true;
  EXPECT_NO_THROW(locked = mutex.try_lock_for(1s));
  const auto mutex_took = since(t);
  t = Clock::now();
  auto tried = client.try_acquire("d");
  const auto try_took = since(t);
  env->freeze(false);
  EXPECT_THAT(waited, StatusIs(Errc::timeout));
  EXPECT_LT(acquire_took, 1s + kSlack);
  EXPECT_FALSE(locked);
  EXPECT_LT(mutex_took, 1s + kSlack);
  EXPECT_FALSE(tried.ok());
  EXPECT_LT(try_took, std::max(ClientOptions().command_timeout, LockOptions().error_retry) + kSlack);
  std::cout << "[measure] frozen." << GetParam().name << ".acquire_1s=" << acquire_took.count()
            << "ms try_lock_for_1s=" << mutex_took.count() << "ms try_acquire=" << try_took.count() << "ms"
            << std::endl;
  // Nothing stays behind once the server answers again.
  EXPECT_TRUE(eventually_ok([&] { return client.acquire("d", 5s); }));
}

// An operator's reads while the server is silent: inspect and list return
// by the command timeout (an error, or what the store could still read,
// never a hang), and work again once it answers.
TEST_P(LockContract, InspectAndListReturnWhileTheServerIsFrozen) {
  auto held = client.acquire("ops/held", 0ms);
  ASSERT_THAT(held, IsOk());
  if (!env->freeze(true)) GTEST_SKIP() << "this backend's server cannot be frozen";
  const auto bound = 2 * ClientOptions().command_timeout + 500ms;
  auto since = [](Clock::time_point t) { return std::chrono::duration_cast<milliseconds>(Clock::now() - t); };
  auto t = Clock::now();
  auto info = client.inspect("ops/held");
  const auto inspect_took = since(t);
  t = Clock::now();
  auto listed = client.list("ops/");
  const auto list_took = since(t);
  env->freeze(false);
  EXPECT_LT(inspect_took, bound);
  EXPECT_LT(list_took, bound);
  if (info.ok()) {
    EXPECT_TRUE(info->held) << "read while frozen: it must still be the truth";
  }
  if (listed.ok()) {
    EXPECT_EQ(listed->size(), 1u);
  }
  std::cout << "[measure] frozen." << GetParam().name << ".inspect=" << inspect_took.count() << "ms ("
            << (info.ok() ? "ok" : info.status().to_string()) << ") list=" << list_took.count() << "ms ("
            << (listed.ok() ? "ok" : listed.status().to_string()) << ")" << std::endl;
  Result<std::vector<ListedLock>> again = Status(Errc::timeout, "not asked");
  for (auto until = Clock::now() + 10s; Clock::now() < until; std::this_thread::sleep_for(50ms))
    if ((again = client.list("ops/")).ok()) break;
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->size(), 1u);
}

// A release while the server is silent: the caller is not held forever (a
// blocking release is bounded by the command timeout, resent at most twice
// after a lost reply; on ZooKeeper the session's end may come first), and
// it never reports success it did not see. The lock is then freed by its
// lease (or session) if the release never arrived.
TEST_P(LockContract, AReleaseOnAFrozenServerReturnsAndIsNotReportedDone) {
  LockOptions o;
  o.watchdog_lease = 1s;  // a release that never arrived frees the lock soon
  o.renew_interval = 300ms;
  auto held = client.acquire("r", 0ms, o);
  ASSERT_THAT(held, IsOk());
  if (!env->freeze(true)) GTEST_SKIP() << "this backend's server cannot be frozen";
  const auto t = Clock::now();
  const Status released = held->release();
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - t);
  env->freeze(false);
  EXPECT_LT(took, 3 * ClientOptions().command_timeout + 6s) << "a release must not hang on a silent server";
  std::cout << "[measure] frozen." << GetParam().name << ".release=" << took.count() << "ms " << released.to_string()
            << std::endl;
  if (!released.ok()) {
    EXPECT_TRUE(released.code() == Errc::outcome_unknown || released.code() == Errc::unavailable ||
                released.code() == Errc::timeout)
        << released.to_string();
  }
  // Once the server answers, the name is free again or frees with the lease.
  // A session's node goes when the resumed server expires that session, on
  // its own schedule (ZooKeeperTest covers a holder freed by its session).
  if (!env->session_held()) {
    EXPECT_TRUE(eventually_ok([&] { return client.acquire("r", 10s); }));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, LockContract, ::testing::ValuesIn(kBackends),
                         [](const ::testing::TestParamInfo<Backend>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace dlock::test

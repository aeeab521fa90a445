// ClientCore's line paths over the in-memory fake: a hand-over granting an
// idle waiter with no attempt of its own, a waiter giving up as the hand-
// over arrives, observers stopped inside their own callback and at shutdown,
// and many threads with tiny timeouts on one fair lock, one semaphore and one
// read-write lock. The sanitizer stages run these.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "client_core.hpp"
#include "dlock/election.hpp"
#include "dlock/mutex.hpp"
#include "dlock/semaphore.hpp"
#include "dlock/shared_mutex.hpp"
#include "support/fake_backend.hpp"
#include "support/fake_client.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using testing::FakeServer;

using testing::eventually;

ClientOptions quiet() {
  ClientOptions o;
  o.logger = [](LogLevel, std::string_view) {};
  return o;
}

Client client_of(FakeServer& server) { return testing::connect(server, quiet()); }

LockOptions fair() {
  LockOptions o;
  o.fair = true;
  return o;
}

struct Lines : ::testing::Test {
  Lines() { server.caps.lines = true; }
  FakeServer server;
};

TEST_F(Lines, AHandOverGrantsAnIdleWaiterWithoutAnotherAttempt) {
  Client a = client_of(server), b = client_of(server);
  Lease held = a.acquire("h", 0ms, fair()).value();
  std::promise<Result<Lease>> got;
  b.async_acquire("h", 10s, fair(), [&](Result<Lease> r) { got.set_value(std::move(r)); });
  // The waiter's first attempt, and its retry once its watch is in place.
  ASSERT_TRUE(eventually([&] { return server.acquires() >= 3; }));
  std::this_thread::sleep_for(20ms);
  const int before = server.acquires();
  ASSERT_TRUE(held.release().ok());
  auto r = got.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(server.acquires(), before) << "the hand-over was the grant: no attempt after the release";
  EXPECT_EQ(r->fence(), server.lock("h")->fence);
  EXPECT_GT(r->valid_until(), std::chrono::steady_clock::now());
}

TEST_F(Lines, AWaiterWhoseFirstAttemptWasOnTheFastPathIsHandedTheLockAtOnce) {
  server.fast_path = true;
  Client a = client_of(server), b = client_of(server);
  Lease held = a.acquire("fp", 0ms, fair()).value();
  auto waiter = std::async(std::launch::async, [&] { return b.acquire("fp", 30s, fair()); });
  ASSERT_TRUE(eventually([&] { return a.inspect("fp")->waiters.value_or(0) == 1; }));
  std::this_thread::sleep_for(20ms);
  const auto released = std::chrono::steady_clock::now();
  ASSERT_TRUE(held.release().ok());
  auto r = waiter.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // Its heartbeat is 10 s away (a third of the 30 s lease): only the hand-over can be this quick.
  EXPECT_LT(std::chrono::steady_clock::now() - released, 2s);
}

// A hand-over to a waiter that died in line: the others are not told when
// its grant runs out, so they look again by its lease, not by their own
// heartbeat (a third of a 30 s lease here).
TEST_F(Lines, WaitersBehindADeadRecipientLookAgainByItsLease) {
  Client a = client_of(server), b = client_of(server);
  Lease held = a.acquire("ghost", 0ms, fair()).value();
  server.queue_ghost("ghost", 2000ms);
  auto behind = std::async(std::launch::async, [&] { return b.acquire("ghost", 20s, fair()); });
  ASSERT_TRUE(eventually([&] { return a.inspect("ghost")->waiters.value_or(0) == 2; }));
  std::this_thread::sleep_for(50ms);
  const auto released = std::chrono::steady_clock::now();
  ASSERT_TRUE(held.release().ok());
  auto r = behind.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto took = std::chrono::steady_clock::now() - released;
  EXPECT_GE(took, 1500ms) << "the dead recipient held it for its lease";
  EXPECT_LT(took, 6s) << "the waiter slept on to its own heartbeat";
}

// As above, with the waiter's attempt out (its reply held) when the
// hand-over to the dead recipient is published: that reply, a busy made
// before the hand-over, must not send it to sleep past the recipient's
// lease (it slept to its heartbeat, 10 s, while a waiter that was not
// attempting looked again by the lease).
TEST_F(Lines, AWaiterWhoseAttemptIsOutWhenTheHandOverComesLooksAgainByItsLease) {
  Client a = client_of(server), b = client_of(server);
  Lease held = a.acquire("ghost", 0ms, fair()).value();
  server.queue_ghost("ghost", 1000ms);
  server.hold_acquire_reply(server.acquires() + 2);  // b's attempt after its watch is confirmed
  auto behind = std::async(std::launch::async, [&] { return b.acquire("ghost", 20s, fair()); });
  ASSERT_TRUE(eventually([&] { return server.held_replies() == 1; }));
  const auto released = std::chrono::steady_clock::now();
  ASSERT_TRUE(held.release().ok());   // handed to the ghost, published
  std::this_thread::sleep_for(20ms);  // the hand-over reaches b first
  server.flush();                     // then b's stale busy answer
  auto r = behind.get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto took = std::chrono::steady_clock::now() - released;
  EXPECT_GE(took, 700ms) << "the dead recipient held it for its lease";
  EXPECT_LT(took, 5s) << "the waiter slept on to its own heartbeat";
}

TEST_F(Lines, AWaiterGivingUpAsTheHandOverArrivesLeavesNothingHeld) {
  Client a = client_of(server), b = client_of(server), c = client_of(server);
  for (int round = 0; round < 40; ++round) {
    const std::string name = "g" + std::to_string(round);
    Lease held = a.acquire(name, 0ms, fair()).value();
    std::promise<Result<Lease>> quit;
    b.async_acquire(name, std::chrono::milliseconds(5 + round % 4), fair(),
                    [&](Result<Lease> r) { quit.set_value(std::move(r)); });
    std::this_thread::sleep_for(std::chrono::milliseconds(4 + round % 3));
    (void)held.release();
    auto r = quit.get_future().get();
    if (r.ok()) (void)r->release();
    auto next = c.acquire(name, 2s, fair());
    ASSERT_TRUE(next.ok()) << "round " << round << ": " << next.status().to_string();
  }
}

TEST_F(Lines, AnObserverMayStopItselfAndTheClientMayCloseUnderIt) {
  Client a = client_of(server);
  Election e(a, "o", "me");
  std::atomic<int> calls{0};
  std::unique_ptr<Observation> obs;
  std::mutex mu;
  Observation first = e.observe([&](const std::optional<LeaderInfo>&) {
    ++calls;
    std::lock_guard relock(mu);
    obs.reset();  // dropped inside its own callback (from the second call on)
  });
  EXPECT_EQ(calls.load(), 1) << "observe() returns after the first call";
  {
    std::lock_guard lk(mu);
    obs = std::make_unique<Observation>(std::move(first));
  }
  Leadership l = e.campaign(1s).value();
  ASSERT_TRUE(eventually([&] { return calls.load() == 2; }));
  ASSERT_TRUE(l.resign().ok());
  l = e.campaign(1s).value();
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(calls.load(), 2) << "no call after it stopped itself";
  {
    std::lock_guard lk(mu);
    EXPECT_EQ(obs, nullptr);
  }
  // A second observer left running when the client goes.
  Client b = client_of(server);
  Election e2(b, "o", "other");
  std::atomic<int> seen{0};
  Observation keep = e2.observe([&](const std::optional<LeaderInfo>&) { ++seen; });
  EXPECT_EQ(seen.load(), 1);
  b = Client(client_of(server));  // the first handle goes: its core shuts down with the observer registered
  (void)l.resign();
}

TEST_F(Lines, ManyThreadsWithTinyTimeoutsKeepEveryRecipesPromise) {
  constexpr int kThreads = 8;
  Client client = client_of(server);
  std::atomic<int> inside{0}, permits_in{0}, max_inside{0}, writers_in{0}, readers_in{0}, bad{0}, grants{0};
  auto note_max = [&](int now) {
    int m = max_inside.load();
    while (now > m && !max_inside.compare_exchange_weak(m, now)) {
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Mutex m(client, "fair", fair());
      Semaphore sem(client, "sem", 3);
      SharedMutex rw(client, "rw");
      for (int i = 0; i < 60; ++i) {
        const auto wait = std::chrono::milliseconds((t + i) % 4);
        if (m.try_lock_for(wait)) {
          if (inside.fetch_add(1) != 0) ++bad;
          ++grants;
          inside.fetch_sub(1);
          m.unlock();
        }
        if (sem.try_acquire_for(wait)) {
          note_max(permits_in.fetch_add(1) + 1);
          std::this_thread::yield();
          permits_in.fetch_sub(1);
          (void)sem.release();
        }
        if (i % 3 == 0) {
          if (rw.try_lock_for(wait)) {
            if (writers_in.fetch_add(1) != 0 || readers_in.load() != 0) ++bad;
            writers_in.fetch_sub(1);
            rw.unlock();
          }
        } else if (rw.try_lock_shared_for(wait)) {
          readers_in.fetch_add(1);
          if (writers_in.load() != 0) ++bad;
          readers_in.fetch_sub(1);
          rw.unlock_shared();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LE(max_inside.load(), 3) << "never more holders than permits";
  EXPECT_GT(grants.load(), 0);
  for (const char* name : {"fair", "sem", "rw"}) {
    auto info = client.inspect(name);
    ASSERT_TRUE(info.ok());
    EXPECT_FALSE(info->held) << name << " was left held";
  }
}

// The rulebook: what each object holds is held(), every release says how it
// went, and an option a recipe would overwrite is refused, not ignored.
TEST_F(Lines, EveryRecipeCountsItsHoldsAsHeldAndReportsItsRelease) {
  Client client = client_of(server);
  Mutex m(client, "m");
  m.lock();
  m.lock();
  EXPECT_EQ(m.held(), 2u);
  EXPECT_TRUE(m.release().ok());
  EXPECT_TRUE(m.release().ok());
  EXPECT_EQ(m.held(), 0u);

  SharedMutex rw(client, "rw");
  rw.lock_shared();
  rw.lock_shared();
  EXPECT_EQ(rw.held(), 2u);
  rw.unlock_shared();
  rw.unlock_shared();
  rw.lock();
  EXPECT_EQ(rw.held(), 1u);
  rw.unlock();
  EXPECT_EQ(rw.held(), 0u);

  Semaphore sem(client, "s", 2);
  sem.acquire();
  EXPECT_EQ(sem.held(), 1u);
  EXPECT_TRUE(sem.release().ok());
  const Status none = sem.release();
  EXPECT_EQ(none.code(), Errc::not_held) << none.to_string();
  EXPECT_EQ(sem.last_release_status().code(), Errc::not_held);
}

TEST_F(Lines, AnOwnerOrHolderARecipeWouldOverwriteIsRefused) {
  Client client = client_of(server);
  LockOptions mine;
  mine.owner = "someone";
  Semaphore sem(client, "s", 2, mine);
  try {
    sem.try_acquire();
    ADD_FAILURE() << "a Semaphore took an owner of the caller's";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  }
  SharedMutex rw(client, "rw", mine);
  EXPECT_THROW(rw.try_lock_shared(), Error);
  EXPECT_EQ(Election(client, "e", "me", mine).campaign(0ms).code(), Errc::invalid_argument);
  LockOptions shown;
  shown.holder = "not-me";
  auto other = Election(client, "e", "me", shown).campaign(0ms);
  EXPECT_EQ(other.code(), Errc::invalid_argument) << other.status().to_string();
  shown.holder = "me";  // its own id: what it shows anyway
  EXPECT_TRUE(Election(client, "e", "me", shown).campaign(0ms).ok());
  EXPECT_EQ(server.abandons().size(), 0u) << "refused before any call";
}

}  // namespace
}  // namespace dlock

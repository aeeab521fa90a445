// ClientCore's decisions, driven through the real client over an in-memory
// fake backend with fault switches: what it does when a reply is lost, held
// back or late, when a release arrives mid-attempt, when a session expires,
// when the backend keeps no re-entry count. No server; each test runs in
// milliseconds.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "client_core.hpp"
#include "dlock/mutex.hpp"
#include "support/fake_backend.hpp"
#include "support/fake_client.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using testing::FakeServer;

using testing::connect;
using testing::eventually;

// The steady clock moved forward on demand: the core's decisions (validity,
// late grants) see time pass without the test sleeping.
struct TestClock {
  std::atomic<std::int64_t> ahead_ns{0};
  void advance(std::chrono::nanoseconds d) { ahead_ns += d.count(); }
  detail::ClientCore::ClockFn fn() {
    return [this] { return std::chrono::steady_clock::now() + std::chrono::nanoseconds(ahead_ns.load()); };
  }
};

LockOptions owner(std::string id) {
  LockOptions o;
  o.owner = std::move(id);
  return o;
}

TEST(CoreDecisions, GrantAndReleaseTouchTheServerOnceEach) {
  FakeServer server;
  {
    Client client = connect(server);
    auto lease = client.acquire("a", 0ms);
    ASSERT_TRUE(lease.ok()) << lease.status().to_string();
    ASSERT_TRUE(server.lock("a").has_value());
    EXPECT_EQ(lease->fence(), server.lock("a")->fence);
    EXPECT_TRUE(lease->release().ok());
    EXPECT_FALSE(server.lock("a").has_value());
  }
  EXPECT_EQ(server.acquires(), 1);
  EXPECT_EQ(server.releases(), 1);
  EXPECT_TRUE(server.abandons().empty());
}

TEST(CoreDecisions, ALostReplyIsResentAndTheReplayGrantsOnce) {
  FakeServer server;
  Client client = connect(server);
  server.drop_acquire_replies(1);  // applied, but the reply never came
  auto lease = client.acquire("a", 0ms, owner("me"));
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  EXPECT_EQ(server.acquires(), 2);
  ASSERT_TRUE(server.lock("a"));
  EXPECT_EQ(server.lock("a")->depth, 1u) << "the resent call is a replay, not a second level";
  const auto calls = server.acquire_calls();
  EXPECT_EQ(calls[0].grant, calls[1].grant);
  EXPECT_EQ(calls[0].attempt, calls[1].attempt);
}

TEST(CoreDecisions, AnAcquireLeftInDoubtIsAbandonedWithATombstone) {
  FakeServer server;
  Client client = connect(server);
  server.drop_acquire_replies(1000);
  LockOptions o = owner("me");
  o.error_retry = 50ms;
  o.lease = 5000ms;
  auto lease = client.acquire("a", 0ms, o);
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.code(), Errc::outcome_unknown);
  ASSERT_TRUE(eventually([&] { return !server.abandons().empty(); }));
  const auto abandon = server.abandons().front();
  EXPECT_TRUE(abandon.in_doubt);
  EXPECT_EQ(abandon.tombstone, 5000ms) << "a stray copy of the attempt must be refused for a lease";
  EXPECT_EQ(abandon.grant, server.acquire_calls().front().grant);
  EXPECT_TRUE(eventually([&] { return !server.lock("a").has_value(); })) << "the undo removed the grant";
}

TEST(CoreDecisions, AGrantWhoseReplyCameTooLateIsUndoneAndAcquiredAgain) {
  FakeServer server;
  TestClock clock;
  Client client = connect(server, {}, clock.fn());
  server.hold_acquire_reply(1);
  LockOptions o = owner("me");
  o.lease = 20ms;
  std::promise<Result<Lease>> result;
  client.async_acquire("a", 2000ms, o, [&](Result<Lease> r) { result.set_value(std::move(r)); });
  ASSERT_TRUE(eventually([&] { return server.held_replies() == 1; }));
  clock.advance(40ms);  // past the 20 ms lease's validity
  server.flush();
  auto lease = result.get_future().get();
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  EXPECT_EQ(client.stats().late_grants, 1u);
  ASSERT_FALSE(server.abandons().empty());
  EXPECT_TRUE(server.abandons().front().in_doubt);
  EXPECT_EQ(server.abandons().front().tombstone, 0ms) << "the same grant id is asked for again";
  EXPECT_GE(server.acquires(), 2);
  EXPECT_GT(lease->valid_until(), clock.fn()());
}

// The same on the blocking fast path: the caller's thread was held up
// between sending and reading the reply (here the clock jumps inside the
// call) past the lease's validity. The grant is undone, never returned, and
// the acquire goes on under the same grant id.
TEST(CoreDecisions, AFastGrantThatCameTooLateIsUndoneAndAcquiredAgain) {
  FakeServer server;
  server.fast_path = true;
  TestClock clock;
  std::atomic<int> calls{0};
  server.during_acquire_now = [&] {
    if (calls++ == 0) clock.advance(1s);  // the first reply is read a second late
  };
  Client client = connect(server, {}, clock.fn());
  LockOptions o;  // the Mutex's own owner: its first lock takes the fast path
  o.lease = 500ms;
  Mutex m(client, "a", o);
  ASSERT_TRUE(m.try_lock_for(2s));
  EXPECT_EQ(client.stats().late_grants, 1u);
  EXPECT_GE(server.acquires(), 2);
  const auto acquires = server.acquire_calls();
  EXPECT_EQ(acquires.front().grant, acquires.back().grant) << "the same grant id is asked for again";
  EXPECT_GT(m.valid_until(), clock.fn()());
  ASSERT_TRUE(server.lock("a").has_value());
  EXPECT_EQ(server.lock("a")->depth, 1u) << "the late grant was undone, not stacked";
  EXPECT_TRUE(m.release().ok());
}

TEST(CoreDecisions, AReleasePublishedWhileAnAttemptIsOutIsNotSleptThrough) {
  FakeServer server;
  server.take("a");              // another owner holds it, 30 s TTL
  server.hold_acquire_reply(2);  // the attempt after the watch is confirmed
  Client client = connect(server);
  std::promise<Result<Lease>> result;
  const auto start = std::chrono::steady_clock::now();
  client.async_acquire("a", 10000ms, {}, [&](Result<Lease> r) { result.set_value(std::move(r)); });
  ASSERT_TRUE(eventually([&] { return server.held_replies() == 1; }));
  server.drop("a", true);  // released and published while the busy answer is held
  ASSERT_TRUE(eventually([&] { return server.lock("a") == std::nullopt; }));
  std::this_thread::sleep_for(20ms);  // the publication reaches the client first
  server.flush();                     // then the stale "busy, 30 s left"
  auto lease = result.get_future().get();
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "slept on the stale TTL";
}

TEST(CoreDecisions, OneReleaseWakesOneWaiter) {
  FakeServer server;
  server.take("a");
  Client client = connect(server);
  std::promise<Result<Lease>> first, second;
  client.async_acquire("a", 10000ms, {}, [&](Result<Lease> r) { first.set_value(std::move(r)); });
  client.async_acquire("a", 10000ms, {}, [&](Result<Lease> r) { second.set_value(std::move(r)); });
  // Each: busy, watch, busy again; then both sleep on the 30 s TTL.
  ASSERT_TRUE(eventually([&] { return server.acquires() == 4; }));
  std::this_thread::sleep_for(20ms);
  server.drop("a", true);
  auto f1 = first.get_future();
  auto f2 = second.get_future();
  ASSERT_TRUE(eventually(
      [&] { return f1.wait_for(0s) == std::future_status::ready || f2.wait_for(0s) == std::future_status::ready; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(server.acquires(), 5) << "a release woke more than one waiter";
  auto& winner = f1.wait_for(0s) == std::future_status::ready ? f1 : f2;
  auto& waiter = &winner == &f1 ? f2 : f1;
  EXPECT_EQ(waiter.wait_for(0s), std::future_status::timeout);
  auto lease = winner.get();
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(lease->release().ok());  // publishes: the other one's turn
  auto next = waiter.get();
  EXPECT_TRUE(next.ok()) << next.status().to_string();
}

TEST(CoreDecisions, WithRefusedWatchesAWaiterPollsAndStillGetsTheLock) {
  FakeServer server;
  server.take("a");
  server.refuse_watches(true);
  Client client = connect(server);
  std::promise<Result<Lease>> result;
  client.async_acquire("a", 10000ms, {}, [&](Result<Lease> r) { result.set_value(std::move(r)); });
  ASSERT_TRUE(eventually([&] { return server.acquires() >= 2; }));
  server.drop("a", false);  // gone without a publication
  auto f = result.get_future();
  ASSERT_EQ(f.wait_for(3s), std::future_status::ready) << "blind waiters poll every <= 500 ms";
  EXPECT_TRUE(f.get().ok());
}

TEST(CoreDecisions, ATimedOutFifoWaiterAbandonsItsAttemptAndWatchedByAttempt) {
  FakeServer server;
  server.caps.always_fair = true;
  server.take("a");
  Client client = connect(server);
  auto lease = client.acquire("a", 50ms);
  EXPECT_EQ(lease.code(), Errc::timeout);
  ASSERT_TRUE(eventually([&] { return server.abandons().size() == 1; }));
  const auto calls = server.acquire_calls();
  ASSERT_GE(calls.size(), 2u);
  for (const auto& c : calls) EXPECT_EQ(c.attempt, calls.front().attempt) << "one attempt id per acquire";
  EXPECT_EQ(server.abandons().front().attempt, calls.front().attempt);
  EXPECT_FALSE(server.abandons().front().in_doubt);
  ASSERT_FALSE(server.watches().empty());
  EXPECT_EQ(server.watches().front().attempt, calls.front().attempt);
}

TEST(CoreDecisions, ABackendWithoutReentryCountsLevelsInTheClient) {
  FakeServer server;
  server.caps.server_reentry = false;
  Client client = connect(server);
  auto a = client.acquire("a", 0ms, owner("me"));
  auto b = client.acquire("a", 0ms, owner("me"));
  auto c = client.acquire("a", 0ms, owner("me"));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(c->reentry_count(), 3u);
  EXPECT_EQ(server.acquires(), 1) << "re-entries stay in the client";
  EXPECT_EQ(server.lock("a")->depth, 1u);
  EXPECT_TRUE(c->release().ok());
  EXPECT_TRUE(b->release().ok());
  EXPECT_EQ(server.releases(), 0);
  EXPECT_TRUE(server.lock("a").has_value());
  EXPECT_TRUE(a->release().ok());
  EXPECT_EQ(server.releases(), 1);
  EXPECT_FALSE(server.lock("a").has_value());
}

TEST(CoreDecisions, ASessionBackendPushesLivenessAndLossAndIsNeverRenewed) {
  FakeServer server;
  server.caps.needs_renewal = false;
  server.caps.server_reentry = false;
  Client client = connect(server);
  std::atomic<int> lost_calls{0};
  LockOptions o;
  o.watchdog_lease = 100ms;
  o.renew_interval = 30ms;
  o.on_lost = [&](LossReason r) {
    if (r == LossReason::expired) ++lost_calls;
  };
  auto lease = client.acquire("a", 0ms, o);
  ASSERT_TRUE(lease.ok());
  const auto until = std::chrono::steady_clock::now() + 10s;
  server.alive_until(until);
  ASSERT_TRUE(eventually([&] { return lease->valid_until() == until; }));
  std::this_thread::sleep_for(150ms);  // past the watchdog lease: a session needs no renewal
  EXPECT_EQ(server.renewals(), 0);
  EXPECT_FALSE(lease->lost());
  server.session_lost(LossReason::expired);
  ASSERT_TRUE(eventually([&] { return lease->lost_token().stop_requested(); }));
  EXPECT_TRUE(eventually([&] { return lost_calls.load() == 1; }));
  EXPECT_EQ(client.stats().leases_lost, 1u);
}

// A session ends (and its nodes with it) just after a blocking grant was
// made on it, before the caller's thread handed the grant to the I/O
// thread. The hold is told lost, and the next session's liveness does not
// keep it valid. Seen as two holders after every ZooKeeper server restarted.
TEST(CoreDecisions, AFastGrantWhoseSessionEndsBeforeItIsStagedIsLost) {
  FakeServer server;
  server.caps.needs_renewal = false;
  server.caps.server_reentry = false;
  server.fast_path = true;
  std::atomic<bool> end_session{true};
  server.after_acquire_now = [&] {
    if (end_session.exchange(false)) server.lost_delivered({}, LossReason::expired);
  };
  Client client = connect(server);
  std::atomic<int> lost_calls{0};
  LockOptions o;
  o.on_lost = [&](LossReason) { ++lost_calls; };
  auto lease = client.acquire("a", 0ms, o);
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  server.alive_until(std::chrono::steady_clock::now() + 10s);  // the next session is vouched for
  ASSERT_TRUE(eventually([&] { return lease->lost_token().stop_requested(); }));
  EXPECT_TRUE(eventually([&] { return lost_calls.load() == 1; }));
  EXPECT_TRUE(lease->lost());
  EXPECT_EQ(client.stats().leases_lost, 1u);
}

// The same for one hold: its loss is told (its node deleted, say) before
// the caller's thread staged the grant.
TEST(CoreDecisions, AFastGrantLostBeforeItIsStagedIsLost) {
  FakeServer server;
  server.caps.needs_renewal = false;
  server.caps.server_reentry = false;
  server.fast_path = true;
  std::atomic<bool> take_it{true};
  server.after_acquire_now = [&] {
    if (!take_it.exchange(false)) return;
    const auto call = server.acquire_calls().back();
    server.lost_delivered({{call.name, call.owner, call.grant}}, LossReason::taken);
  };
  Client client = connect(server);
  std::atomic<int> taken{0};
  LockOptions o;
  o.on_lost = [&](LossReason r) {
    if (r == LossReason::taken) ++taken;
  };
  auto lease = client.acquire("a", 0ms, o);
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  server.alive_until(std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(eventually([&] { return lease->lost_token().stop_requested(); }));
  EXPECT_TRUE(eventually([&] { return taken.load() == 1; }));
  auto other = client.acquire("b", 0ms, o);  // grants after it are not touched
  ASSERT_TRUE(other.ok());
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(other->lost());
}

// A release told while a waiter's first attempt is still out (ZooKeeper's
// semaphore waiter watches several nodes ahead, and one may go before its
// busy answer): the waiter looks again at once, not at its deadline. It
// was dropped, as the waiter had not yet joined the name's waiters.
TEST(CoreDecisions, AReleaseToldBeforeTheFirstBusyAnswerWakesTheWaiter) {
  FakeServer server;
  server.caps.needs_renewal = false;
  server.set_holder_ttl(std::nullopt);  // busy answers say: wait for the release
  Client client = connect(server);
  server.take("x");
  server.release_before_busy = true;
  const auto t0 = std::chrono::steady_clock::now();
  auto got = client.acquire("x", 5s);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "woken by the release, not its deadline";
  EXPECT_EQ(server.acquires(), 2);
}

// A client closed while a cleanup of its (an abandon) is still out waits
// for it, within the command timeout: a connection closed under it would
// never send what the cleanup still needs (Redis: the whole script after
// NOSCRIPT), and the place it left in the line would be handed the lock,
// holding the line for a lease.
TEST(CoreDecisions, CloseWaitsForACleanupStillOut) {
  FakeServer server;
  server.caps.lines = true;
  LockOptions fair;
  fair.fair = true;
  Client holder = connect(server);
  auto held = holder.acquire("x", 0ms, fair);
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  server.hold_abandons(true);
  auto quitter = std::make_unique<Client>(connect(server));
  auto r = quitter->acquire("x", 200ms, fair);  // in line, then gives up: its abandon is held
  EXPECT_EQ(r.status().code(), Errc::timeout);
  std::thread closer([&] { quitter.reset(); });  // waits for the abandon
  std::this_thread::sleep_for(100ms);
  server.hold_abandons(false);
  server.flush();  // the cleanup lands
  closer.join();
  ASSERT_TRUE(held->release().ok());
  Client next = connect(server);
  auto got = next.acquire("x", 1s, fair);
  EXPECT_TRUE(got.ok()) << got.status().to_string() << ": the line went to the departed waiter";
}

TEST(CoreDecisions, RenewalsFailingWhileTheLinkIsDownLoseTheLease) {
  FakeServer server;
  Client client = connect(server);
  std::atomic<int> unreachable{0};
  LockOptions o;
  o.watchdog_lease = 400ms;
  o.renew_interval = 100ms;
  o.on_lost = [&](LossReason r) {
    if (r == LossReason::unreachable) ++unreachable;
  };
  auto lease = client.acquire("a", 0ms, o);
  ASSERT_TRUE(lease.ok());
  server.fail_renewals(true);
  server.link(false);
  ASSERT_TRUE(eventually([&] { return lease->lost(); }));
  EXPECT_TRUE(eventually([&] { return unreachable.load() == 1; }));
  EXPECT_GE(server.renewals(), 1);
}

TEST(CoreDecisions, DroppingTheClientMidAttemptCancelsAndAbandonsIt) {
  FakeServer server;
  server.hold_acquire_reply(1);
  std::promise<Result<Lease>> result;
  {
    Client client = connect(server);
    client.async_acquire("a", 1000ms, owner("me"), [&](Result<Lease> r) { result.set_value(std::move(r)); });
    ASSERT_TRUE(eventually([&] { return server.held_replies() == 1; }));
  }
  auto r = result.get_future().get();
  EXPECT_EQ(r.code(), Errc::cancelled);
  ASSERT_EQ(server.abandons().size(), 1u);
  EXPECT_TRUE(server.abandons().front().in_doubt) << "its request was out: it may have been granted";
  EXPECT_FALSE(server.lock("a").has_value()) << "the undo went out before the client closed";
}

TEST(CoreDecisions, AShutdownReleasesEveryHold) {
  FakeServer server;
  {
    Client client = connect(server);
    auto a = client.acquire("a", 0ms, owner("me"));
    auto again = client.acquire("a", 0ms, owner("me"));
    auto b = client.acquire("b", 0ms);
    ASSERT_TRUE(a.ok() && again.ok() && b.ok());
    EXPECT_EQ(server.lock("a")->depth, 2u);
  }  // the leases go first (background releases), then the client
  EXPECT_FALSE(server.lock("a").has_value());
  EXPECT_FALSE(server.lock("b").has_value());
}

TEST(CoreDecisions, ShutdownInsideAnAsyncCallbackDeletesTheCoreAfterTheDrain) {
  FakeServer server;
  std::promise<void> done;
  {
    auto client = std::make_shared<std::optional<Client>>(connect(server));
    (*client)->async_acquire("a", 0ms, {}, [client, &done](Result<Lease> r) mutable {
      EXPECT_TRUE(r.ok());
      client->reset();  // the last handle, dropped on the I/O thread
      done.set_value();
    });
  }
  ASSERT_EQ(done.get_future().wait_for(5s), std::future_status::ready);
  // The I/O thread deletes the core (and the backend) once its loop drained.
  ASSERT_TRUE(eventually([&] { return server.backends_destroyed() == 1; }));
  EXPECT_FALSE(server.lock("a").has_value()) << "shutdown released the lease";
}

TEST(CoreDecisions, ALostReleaseReplyIsResentAndItsReplayCountsAsReleased) {
  FakeServer server;
  Client client = connect(server);
  auto lease = client.acquire("a", 0ms, owner("me"));
  ASSERT_TRUE(lease.ok());
  server.drop_release_replies(1);  // applied; the reply lost
  EXPECT_TRUE(lease->release().ok()) << "the replay finds it released by our first attempt";
  EXPECT_EQ(server.releases(), 2);
  EXPECT_FALSE(server.lock("a").has_value());
}

TEST(CoreDecisions, ARenewalThatFindsAnotherOwnerReportsTaken) {
  FakeServer server;
  Client client = connect(server);
  std::atomic<int> taken{0};
  LockOptions o;
  o.watchdog_lease = 300ms;
  o.renew_interval = 50ms;
  o.on_lost = [&](LossReason r) {
    if (r == LossReason::taken) ++taken;
  };
  auto lease = client.acquire("a", 0ms, o);
  ASSERT_TRUE(lease.ok());
  server.take("a");  // someone else's now (as after an expiry and a new grant)
  ASSERT_TRUE(eventually([&] { return lease->lost(); }));
  EXPECT_TRUE(eventually([&] { return taken.load() == 1; }));
  EXPECT_EQ(server.lock("a")->owner, "other") << "the lost holder never touches the new one";
}

TEST(CoreDecisions, WaitersOfTheSameOwnerReenterWhenItIsGranted) {
  FakeServer server;
  server.take("a");
  Client client = connect(server);
  std::promise<Result<Lease>> first, second;
  client.async_acquire("a", 10000ms, owner("me"), [&](Result<Lease> r) { first.set_value(std::move(r)); });
  client.async_acquire("a", 10000ms, owner("me"), [&](Result<Lease> r) { second.set_value(std::move(r)); });
  ASSERT_TRUE(eventually([&] { return server.acquires() == 4; }));
  server.drop("a", true);  // one release: wakes one waiter; its grant lets the other re-enter
  auto a = first.get_future().get();
  auto b = second.get_future().get();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(server.lock("a")->depth, 2u);
  EXPECT_EQ(a->fence(), b->fence());
}

TEST(CoreDecisions, AWokenWaiterThatFailsPassesTheWakeUpOn) {
  FakeServer server;
  server.take("a");  // 30 s TTL: only a release frees it in time
  Client client = connect(server);
  std::promise<Result<Lease>> first, second;
  client.async_acquire("a", 10000ms, {}, [&](Result<Lease> r) { first.set_value(std::move(r)); });
  ASSERT_TRUE(eventually([&] { return server.acquires() == 2; }));
  client.async_acquire("a", 10000ms, {}, [&](Result<Lease> r) { second.set_value(std::move(r)); });
  ASSERT_TRUE(eventually([&] { return server.acquires() == 4; }));
  // The release wakes the first waiter, whose attempt then fails for good.
  server.fail_calls(1, Status(Errc::permission_denied, "fake: NOPERM"));
  server.drop("a", true);
  EXPECT_EQ(first.get_future().get().code(), Errc::permission_denied);
  auto f = second.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "the wake-up died with the first waiter";
  EXPECT_TRUE(f.get().ok());
}

// A Mutex shared by threads (allowed: they share its ownership). Thread B
// re-enters through the I/O thread while thread A unlocks the last level on
// the fast path: the two must be ordered by the hold, or both send held = 1
// and the server ends with a level nobody releases (or a false lease_lost).
// The schedule is forced: the I/O thread is blocked while B's re-entry is
// queued and A's release passes its checks; A's release is then parked in
// the backend while the I/O thread runs.
TEST(CoreDecisions, AFastReleaseAndAReentryOfOneSharedMutexAreOrdered) {
  FakeServer server;
  server.fast_path = true;
  std::promise<void> io_blocked, release_parked;
  std::promise<void> unblock_io, unpark_release;
  std::shared_future<void> unblock_f = unblock_io.get_future().share();
  std::shared_future<void> unpark_f = unpark_release.get_future().share();
  server.before_acquire = [&](const std::string& name) {
    if (name != "blocker") return;
    io_blocked.set_value();
    unblock_f.wait();
  };
  server.before_release_now = [&] {
    release_parked.set_value();
    unpark_f.wait_for(300ms);  // the I/O thread's calls may overtake it meanwhile
  };
  Client client = connect(server);
  Mutex m(client, "a");
  ASSERT_TRUE(m.try_lock());
  client.async_acquire("blocker", 0ms, {}, [](Result<Lease>) {});
  io_blocked.get_future().wait();
  auto b = std::async(std::launch::async, [&] { return m.try_lock_for(2s); });  // a level is held: re-entry
  std::this_thread::sleep_for(50ms);  // B's re-entry is queued behind the blocked I/O thread
  auto a = std::async(std::launch::async, [&] { return m.release(); });
  release_parked.get_future().wait();
  unblock_io.set_value();
  std::this_thread::sleep_for(100ms);
  unpark_release.set_value();
  const Status released = a.get();
  EXPECT_TRUE(released.ok()) << released.to_string();
  bool b_locked = false;
  try {
    b_locked = b.get();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "B's lock threw: " << e.what();
  }
  ASSERT_TRUE(b_locked) << "B holds the mutex, re-entered or granted afresh";
  ASSERT_TRUE(server.lock("a").has_value());
  EXPECT_EQ(server.lock("a")->depth, 1u) << "one level on the server, B's";
  EXPECT_EQ(m.held(), 1u);
  EXPECT_TRUE(m.release().ok());
  EXPECT_FALSE(server.lock("a").has_value()) << "nothing left for the watchdog to renew";
  EXPECT_EQ(client.stats().release_failures, 0u);
}

// Two re-entries of one hold queued behind each other: the second runs as
// soon as the first is answered and must send the depth the first set. It
// read the old depth, sent held = 1 again, the server took it for a replay
// of the first, and the client counted three levels where the server had
// two (found by the stress test below).
TEST(CoreDecisions, QueuedReentriesOfOneHoldEachAddALevel) {
  FakeServer server;
  std::promise<void> io_blocked, unblock_io;
  std::shared_future<void> unblock_f = unblock_io.get_future().share();
  server.before_acquire = [&](const std::string& name) {
    if (name != "blocker") return;
    io_blocked.set_value();
    unblock_f.wait();
  };
  Client client = connect(server);
  Mutex m(client, "a");
  ASSERT_TRUE(m.try_lock());
  client.async_acquire("blocker", 0ms, {}, [](Result<Lease>) {});
  io_blocked.get_future().wait();
  auto b = std::async(std::launch::async, [&] { return m.try_lock_for(2s); });
  auto c = std::async(std::launch::async, [&] { return m.try_lock_for(2s); });
  std::this_thread::sleep_for(50ms);  // both re-entries are queued behind the blocked I/O thread
  unblock_io.set_value();
  EXPECT_TRUE(b.get());
  EXPECT_TRUE(c.get());
  EXPECT_EQ(m.held(), 3u);
  ASSERT_TRUE(server.lock("a").has_value());
  EXPECT_EQ(server.lock("a")->depth, 3u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(m.release().ok()) << i;
  EXPECT_FALSE(server.lock("a").has_value());
}

// A fast grant whose blocking release is not offered when it is released
// (PostgreSQL's pool of blocking connections was busy): the release goes
// through the I/O thread instead. It was reported failed and never sent,
// and the lock stayed held for its whole lease (the inventory experiment's
// PostgreSQL waiters all timed out under load).
TEST(CoreDecisions, AFastGrantIsReleasedThroughTheIoThreadWhenNoBlockingReleaseIsOffered) {
  FakeServer server;
  server.fast_path = true;
  Client client = connect(server);
  Mutex m(client, "a");
  ASSERT_TRUE(m.try_lock());
  server.release_now_offered = false;
  EXPECT_TRUE(m.release().ok());
  EXPECT_FALSE(server.lock("a").has_value()) << "the release was never sent";
  EXPECT_EQ(client.stats().release_failures, 0u);
  server.release_now_offered = true;
  ASSERT_TRUE(m.try_lock());  // and the hold's bookkeeping is sound afterwards
  EXPECT_TRUE(m.release().ok());
  EXPECT_FALSE(server.lock("a").has_value());
}

// The same race, undirected: threads sharing one Mutex lock and unlock it
// as fast as they can on the fast path. Every level is released exactly
// once, no lease is ever reported lost, and nothing is left behind.
TEST(CoreDecisions, ThreadsSharingOneMutexNeverLoseOrLeakALevel) {
  FakeServer server;
  server.fast_path = true;
  std::mutex why_mu;
  std::vector<std::string> why;  // the failures, for the message
  ClientOptions co;
  co.logger = [&](LogLevel, std::string_view m) {
    std::lock_guard lk(why_mu);
    why.emplace_back(m);
  };
  Client client = connect(server, co);
  Mutex m(client, "a");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 300; ++i) {
        try {
          if (!m.try_lock_for(2s)) {
            ++failures;
            std::lock_guard lk(why_mu);
            why.push_back("timeout");
            continue;
          }
          if (Status s = m.release(); !s.ok()) {
            ++failures;
            std::lock_guard lk(why_mu);
            why.push_back(s.to_string());
          }
        } catch (const std::exception& e) {
          ++failures;
          std::lock_guard lk(why_mu);
          why.push_back(e.what());
        }
      }
    });
  for (auto& t : threads) t.join();
  std::string all;
  for (const auto& w : why) all += w + "\n";
  EXPECT_EQ(failures.load(), 0) << all;
  EXPECT_EQ(m.held(), 0u);
  EXPECT_TRUE(eventually([&] { return !server.lock("a").has_value(); })) << "a level was left on the server";
  EXPECT_EQ(client.stats().release_failures, 0u);
  EXPECT_EQ(client.stats().leases_lost, 0u);
}

}  // namespace
}  // namespace dlock

// The recipes' contract, one suite run against every backend (backend_envs):
// fair locks grant in arrival order, SharedMutex lets readers overlap and
// never starves a writer, Semaphore never has more holders than permits,
// Election's terms increase. A backend that refuses them (Redlock) is tested
// for a clear refusal instead. Then the faults: a holder whose server stays
// silent past its lease is told of the loss, a live waiter keeps its place
// through many leases, and a holder paused past its lease (the dlock tool,
// stopped) is overtaken and told when it wakes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <dlock/dlock.hpp>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend_envs.hpp"
#include "support/process.hpp"
#include "support/status_matchers.hpp"
#include "support/temp_dir.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

class RecipeContract : public ::testing::TestWithParam<Backend> {
 protected:
  std::unique_ptr<BackendEnv> env = GetParam().make();
  Client client = env->client();

  // Waits until the server counts `n` waiters on `name` (their places are
  // taken in the order the test starts them).
  void await_waiters(const std::string& name, unsigned n) {
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < until) {
      auto info = client.inspect(name);
      if (info.ok() && info->waiters.value_or(0) >= n) return;
      std::this_thread::sleep_for(5ms);
    }
    FAIL() << "waiters on " << name << " never reached " << n;
  }
};

LockOptions fair() {
  LockOptions o;
  o.fair = true;
  return o;
}

TEST_P(RecipeContract, ABackendWithoutLinesRefusesEveryRecipeSayingWhy) {
  if (env->lines()) GTEST_SKIP() << "offers them (the other tests)";
  auto r = client.acquire("f", 0ms, fair());
  EXPECT_THAT(r.status(), StatusIs(Errc::invalid_argument));
  // The backend's reason follows (Redlock: a majority; the plain layout: no line).
  EXPECT_THAT(r.status().message(), HasSubstr("does not offer fair, shared or counted locks: "));
  SharedMutex rw(client, "rw");
  EXPECT_THROW(rw.lock_shared(), Error);
  Semaphore sem(client, "s", 2);
  EXPECT_THROW(sem.try_acquire(), Error);
  Election e(client, "e", "me");
  EXPECT_THAT(e.campaign(0ms).status(), StatusIs(Errc::invalid_argument));
}

TEST_P(RecipeContract, AFairLockGrantsInArrivalOrder) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  Lease first = client.acquire("line", 5s, fair()).value();
  constexpr int kWaiters = 4;
  std::vector<Client> clients;
  for (int i = 0; i < kWaiters; ++i) clients.push_back(env->client());
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      Lease l = clients[i].acquire("line", 20s, fair()).value();
      std::lock_guard lk(mu);
      order.push_back(i);
    });
    await_waiters("line", i + 1);
  }
  ASSERT_THAT(first.release(), IsOk());
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_FALSE(client.inspect("line")->held);
}

TEST_P(RecipeContract, AWaiterThatGivesUpLeavesTheLineWithoutStallingIt) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  Lease holder = client.acquire("giveup", 5s, fair()).value();
  Client quitter_client = env->client(), stayer_client = env->client();
  auto quitter = std::async(std::launch::async, [&] { return quitter_client.acquire("giveup", 300ms, fair()); });
  await_waiters("giveup", 1);
  auto stayer = std::async(std::launch::async, [&] { return stayer_client.acquire("giveup", 20s, fair()); });
  await_waiters("giveup", 2);
  EXPECT_THAT(quitter.get().status(), StatusIs(Errc::timeout));
  ASSERT_THAT(holder.release(), IsOk());
  auto got = stayer.get();
  ASSERT_THAT(got.status(), IsOk()) << "the line went on past the waiter that left";
  EXPECT_GT(got->fence(), 0u);
}

TEST_P(RecipeContract, AWaiterTimingOutAsTheReleaseArrivesLeavesNothingHeld) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  // Many rounds with the release and the waiter's deadline close together:
  // whichever wins, the lock must end up free or with the next waiter.
  for (int round = 0; round < 15; ++round) {
    const std::string name = "race" + std::to_string(round);
    Lease holder = client.acquire(name, 5s, fair()).value();
    Client other = env->client();
    auto waiter = std::async(std::launch::async, [&] { return other.acquire(name, 60ms, fair()); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + round % 5 * 4));
    (void)holder.release();
    auto r = waiter.get();
    if (r.ok()) {
      ASSERT_THAT(r->release(), IsOk());
    }
    auto after = client.acquire(name, 5s, fair());
    ASSERT_THAT(after.status(), IsOk()) << "round " << round << ": the lock stayed held";
  }
}

TEST_P(RecipeContract, ReadersOverlapAndAWriterWaitsForThem) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  Client c2 = env->client();
  SharedMutex r1(client, "rw"), r2(c2, "rw"), w(env->client(), "rw");
  std::shared_lock a(r1);
  ASSERT_TRUE(r2.try_lock_shared_for(5s)) << "a second reader is let in beside the first";
  EXPECT_EQ(client.inspect("rw")->holders, 2u);
  EXPECT_TRUE(client.inspect("rw")->shared);
  EXPECT_FALSE(w.try_lock_for(200ms)) << "a writer waits for the readers";
  const auto reader_fence = r2.fence();
  r2.unlock_shared();
  a.unlock();
  ASSERT_TRUE(w.try_lock_for(5s));
  EXPECT_GT(w.fence(), reader_fence) << "a writer's fence is above every fence granted before it";
  w.unlock();
}

TEST_P(RecipeContract, ReadersArrivingWhileAWriterWaitsQueueBehindIt) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  Client cw = env->client(), cr = env->client();
  SharedMutex first(client, "wq"), writer(cw, "wq"), late(cr, "wq");
  first.lock_shared();
  auto w = std::async(std::launch::async, [&] { return writer.try_lock_for(20s); });
  await_waiters("wq", 1);
  EXPECT_FALSE(late.try_lock_shared_for(300ms)) << "a reader does not pass a waiting writer";
  first.unlock_shared();
  ASSERT_TRUE(w.get());
  auto r = std::async(std::launch::async, [&] { return late.try_lock_shared_for(20s); });
  await_waiters("wq", 1);
  writer.unlock();
  EXPECT_TRUE(r.get());
  late.unlock_shared();
}

TEST_P(RecipeContract, AnUpgradeIsRefusedNotDeadlocked) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  SharedMutex rw(client, "up");
  rw.lock_shared();
  try {
    rw.lock();
    FAIL() << "an upgrade was granted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::precondition_failed);
  }
  rw.unlock_shared();
  // std::unique_lock / std::shared_lock work with it.
  { std::unique_lock wr(rw); }
  { std::shared_lock rd(rw); }
}

TEST_P(RecipeContract, ASemaphoreNeverHasMoreHoldersThanPermits) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  std::vector<Client> clients;
  std::vector<std::unique_ptr<Semaphore>> sems;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(env->client());
    sems.push_back(std::make_unique<Semaphore>(clients.back(), "sem", 3));
  }
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(sems[i]->try_acquire_for(5s)) << "permit " << i;
  EXPECT_EQ(client.inspect("sem")->holders, 3u);
  EXPECT_FALSE(sems[3]->try_acquire_for(200ms)) << "a fourth holder";
  auto fourth = std::async(std::launch::async, [&] { return sems[3]->try_acquire_for(20s); });
  await_waiters("sem", 1);
  EXPECT_THAT(sems[1]->release(), IsOk());
  EXPECT_TRUE(fourth.get()) << "a released permit goes to the waiter";
  EXPECT_EQ(client.inspect("sem")->holders, 3u);
  Semaphore disagree(env->client(), "sem", 5);
  try {
    disagree.try_acquire();
    FAIL() << "a client with another permit count was let in";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("3"));
  }
}

TEST_P(RecipeContract, ALapsedPermitComesBackWithoutAnotherAcquire) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  if (env->session_held()) GTEST_SKIP() << "a session keeps permits: its end frees them (zookeeper_lines_test)";
  LockOptions brief;
  brief.lease = 300ms;  // the holder stops renewing: as if it crashed
  Semaphore crashed(env->client(), "lapse", 1, brief);
  ASSERT_TRUE(crashed.try_acquire());
  EXPECT_EQ(client.inspect("lapse")->holders, 1u);
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(client.inspect("lapse")->holders, 0u) << "inspect counts only live permits";
  Semaphore next(env->client(), "lapse", 1);
  EXPECT_TRUE(next.try_acquire());
}

TEST_P(RecipeContract, AnElectionHasOneLeaderPerTermAndObserversSeeEachChange) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  Client cb = env->client(), co = env->client();
  Election a(client, "lead", "node-a"), b(cb, "lead", "node-b"), watcher(co, "lead", "watcher");
  std::mutex mu;
  std::vector<std::optional<LeaderInfo>> seen;
  Observation obs = watcher.observe([&](const std::optional<LeaderInfo>& l) {
    std::lock_guard lk(mu);
    seen.push_back(l);
  });
  {
    std::lock_guard lk(mu);
    EXPECT_EQ(seen, (std::vector<std::optional<LeaderInfo>>{std::nullopt}))
        << "observe() returns after the first report";
  }
  // Each leader must be told to the observer while it leads (a change made
  // before the observer could look may be told as one with the next).
  auto await_seen = [&](const LeaderInfo& who) {
    const auto until = std::chrono::steady_clock::now() + 5s;
    for (;;) {
      {
        std::lock_guard lk(mu);
        if (!seen.empty() && seen.back() == who) return true;
      }
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(10ms);
    }
  };
  Leadership la = a.campaign(5s).value();
  EXPECT_EQ(a.leader()->value(), (LeaderInfo{"node-a", la.term()}));
  ASSERT_TRUE(await_seen({"node-a", la.term()})) << "the observer never saw node-a lead";
  EXPECT_THAT(b.campaign(0ms).status(), StatusIs(Errc::busy));
  auto lb = std::async(std::launch::async, [&] { return b.campaign(20s); });
  await_waiters("lead", 1);
  ASSERT_THAT(la.resign(), IsOk());
  auto won = lb.get();
  ASSERT_THAT(won.status(), IsOk());
  EXPECT_GT(won->term(), la.term()) << "terms strictly increase";
  EXPECT_EQ(watcher.leader()->value(), (LeaderInfo{"node-b", won->term()}));
  EXPECT_TRUE(await_seen({"node-b", won->term()})) << "the observer never saw node-b lead";
  obs.stop();
}

// A leader whose lease ran out unrenewed is no longer leading (leading()
// checks valid_until() as well as the loss signal), and the next candidate
// leads with a larger term.
TEST_P(RecipeContract, ALeadershipWhoseLeaseRanOutIsNotLeading) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  if (env->session_held()) GTEST_SKIP() << "a session keeps leadership: no fixed lease";
  LockOptions brief;
  brief.lease = 300ms;  // not renewed: as if the leader's process were starved
  Election e(client, "brief", "starved", brief);
  Leadership lead = e.campaign(5s).value();
  EXPECT_TRUE(lead.leading());
  EXPECT_LE(lead.valid_until(), Clock::now() + 300ms);
  std::this_thread::sleep_for(400ms);
  EXPECT_FALSE(lead.leading()) << "past valid_until()";
  auto next = Election(env->client(), "brief", "next").campaign(5s);
  ASSERT_THAT(next.status(), IsOk());
  EXPECT_GT(next->term(), lead.term());
}

// A live waiter's place is kept by its heartbeats (or its session), never by
// a deadline it set when it arrived: one that waits five times its lease is
// still served before a later arrival.
TEST_P(RecipeContract, ALiveWaiterKeepsItsPlaceThroughManyLeases) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  LockOptions brief = fair();
  brief.watchdog_lease = 500ms;
  brief.renew_interval = 150ms;
  Lease holder = client.acquire("patient", 5s, brief).value();
  Client early_client = env->client(), late_client = env->client();
  std::mutex mu;
  std::vector<std::pair<std::string, std::uint64_t>> order;
  auto take = [&](Client& c, std::string who) {
    return std::async(std::launch::async, [&, who] {
      auto l = c.acquire("patient", 30s, brief);
      if (!l.ok()) return l.status();
      {
        std::lock_guard lk(mu);
        order.emplace_back(who, l->fence());
      }
      return l->release();
    });
  };
  auto early = take(early_client, "early");
  await_waiters("patient", 1);
  std::this_thread::sleep_for(2500ms);  // five leases of waiting
  auto late = take(late_client, "late");
  await_waiters("patient", 2);
  std::this_thread::sleep_for(300ms);
  ASSERT_THAT(holder.release(), IsOk());
  EXPECT_THAT(early.get(), IsOk());
  EXPECT_THAT(late.get(), IsOk());
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0].first, "early") << "the waiter that waited longest lost its place";
  EXPECT_LT(order[0].second, order[1].second);
}

// Holders of every recipe are told of a loss (lost_token) when their server
// stays silent past the lease, and the server frees what they held once it
// answers again: a live holder's grant never disappears unannounced.
TEST_P(RecipeContract, RecipeHoldersAreToldOfALossWhenTheirServerIsSilentPastTheLease) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  LockOptions o;
  o.watchdog_lease = 1s;
  o.renew_interval = 300ms;
  SharedMutex reader(client, "rw-lost", o);
  Semaphore permit(client, "sem-lost", 1, o);
  Election election(client, "lead-lost", "me", o);
  reader.lock_shared();
  ASSERT_TRUE(permit.try_acquire_for(5s));
  Leadership lead = election.campaign(5s).value();
  const std::uint64_t reader_fence = reader.fence(), permit_fence = permit.fences().front();
  EXPECT_FALSE(reader.lost_token().stop_requested());
  EXPECT_FALSE(permit.lost_token().stop_requested());
  EXPECT_TRUE(lead.leading());
  if (!env->freeze(true)) GTEST_SKIP() << "this backend's server cannot be frozen";
  const auto frozen = Clock::now();
  auto all_lost = [&] {
    return reader.lost_token().stop_requested() && permit.lost_token().stop_requested() && lead.lost();
  };
  // A session (ZooKeeper, 10 s by default) is given up on within its timeout.
  while (!all_lost() && Clock::now() - frozen < 30s) std::this_thread::sleep_for(20ms);
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - frozen);
  env->freeze(false);
  EXPECT_TRUE(reader.lost_token().stop_requested()) << "a read lock";
  EXPECT_TRUE(permit.lost_token().stop_requested()) << "a permit";
  EXPECT_TRUE(lead.lost()) << "a leadership";
  EXPECT_FALSE(lead.leading());
  std::cout << "[measure] silent." << GetParam().name << ".all_told=" << took.count() << "ms" << std::endl;
  // Once the server answers, others get what was lost, with larger fences
  // (a session's grants go when the server expires the session).
  Client other = env->client();
  SharedMutex writer(other, "rw-lost");
  EXPECT_TRUE(writer.try_lock_for(30s)) << "the lost read lock was freed";
  if (writer.fence() != 0) {
    EXPECT_GT(writer.fence(), reader_fence);
  }
  Semaphore next(other, "sem-lost", 1);
  EXPECT_TRUE(next.try_acquire_for(30s)) << "the lost permit came back";
  if (!next.fences().empty()) {
    EXPECT_GT(next.fences().front(), permit_fence);
  }
  Election rival(other, "lead-lost", "rival");
  auto won = rival.campaign(30s);
  ASSERT_THAT(won.status(), IsOk()) << "the lost leadership was freed";
  EXPECT_GT(won->term(), lead.term());
  EXPECT_EQ(rival.leader()->value_or(LeaderInfo{}).id, "rival");
}

// One range of permits on every backend (1..kMaxPermits), and no NUL in a
// candidate id or holder label: refused before any I/O, alike everywhere.
TEST_P(RecipeContract, PermitsAndIdsHaveOneRangeOnEveryBackend) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  Semaphore widest(client, "sem-wide", kMaxPermits);
  ASSERT_TRUE(widest.try_acquire_for(5s));
  EXPECT_EQ(client.inspect("sem-wide").value().holders, 1u);
  EXPECT_THAT(widest.release(), IsOk());
  EXPECT_THAT(widest.last_release_status(), IsOk());
  for (unsigned permits : {0u, kMaxPermits + 1, 4294967295u}) {
    Semaphore bad(client, "sem-bad", permits);
    try {
      bad.try_acquire();
      ADD_FAILURE() << permits << " permits were taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << permits;
    }
  }
  const std::string id("node-a\0evil", 11);
  Election election(client, "lead-nul", id);
  EXPECT_THAT(election.campaign(0ms).status(), StatusIs(Errc::invalid_argument));
  LockOptions labelled;
  labelled.holder_label = std::string("job\0x", 5);
  EXPECT_THAT(client.acquire("nul-label", 0ms, labelled).status(), StatusIs(Errc::invalid_argument));
  EXPECT_FALSE(client.inspect("lead-nul").value().held) << "nothing was written";
  EXPECT_FALSE(client.inspect("nul-label").value().held);
}

// lost_token() of a SharedMutex or a Semaphore fires when any hold of the
// object is lost, the older as well as the newest (an operator deletes one
// read hold, one permit), and never when a hold is released.
TEST_P(RecipeContract, LosingAnOlderHoldFiresTheObjectsLostToken) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  LockOptions o;
  o.watchdog_lease = 1s;
  o.renew_interval = 200ms;
  SharedMutex rw(client, "rw-older", o);
  rw.lock_shared();
  const std::uint64_t older = rw.fence();
  rw.lock_shared();
  ASSERT_NE(rw.fence(), older);
  Semaphore sem(client, "sem-older", 3, o);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(sem.try_acquire_for(5s));
  EXPECT_THAT(sem.release(), IsOk());  // the oldest permit, given back: no loss
  rw.lock_shared();
  rw.unlock_shared();  // the newest read hold, given back: no loss
  EXPECT_FALSE(rw.lost_token().stop_requested());
  EXPECT_FALSE(sem.lost_token().stop_requested());
  std::atomic<bool> told{false};
  std::stop_callback on_lost(rw.lost_token(), [&] { told = true; });

  ASSERT_TRUE(env->drop_hold("rw-older", older)) << "the older read hold, fence " << older;
  ASSERT_TRUE(env->drop_hold("sem-older", sem.fences().front())) << "the older permit";
  const auto until = Clock::now() + 15s;
  while (!(rw.lost_token().stop_requested() && sem.lost_token().stop_requested()) && Clock::now() < until)
    std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(rw.lost_token().stop_requested()) << "the older of two read holds was lost";
  EXPECT_TRUE(told.load()) << "a callback on the token taken before the loss";
  EXPECT_TRUE(sem.lost_token().stop_requested()) << "the older of two permits was lost";
  EXPECT_EQ(rw.readers(), 2u);
  EXPECT_EQ(sem.held(), 2u);
}

#ifdef DLOCK_CLI_PATH
// The dlock tool's arguments: `how` (subcommand and flags) on this
// backend's server with a short lease (or session), NAME, and `sh -c CMD`.
std::vector<std::string> dlock_tool(const BackendEnv& env, const std::vector<std::string>& how, const std::string& name,
                                    const std::string& cmd) {
  std::vector<std::string> args = {DLOCK_CLI_PATH};
  args.insert(args.end(), how.begin(), how.end());
  if (env.session_held())
    args.insert(args.end(), {"--url", env.url() + "?session_timeout=2s"});
  else
    args.insert(args.end(), {"--url", env.url(), "--ttl", "600ms"});
  args.insert(args.end(), {"--grace", "1s", name, "--", "sh", "-c", cmd});
  return args;
}

// A waiter whose process dies in line (SIGKILL: no goodbye) leaves it by its
// lease or session; the waiter behind it is served when the holder releases.
TEST_P(RecipeContract, AWaiterKilledInLineDoesNotStallIt) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  if (env->url().empty()) GTEST_SKIP() << "no server another program can reach";
  Lease holder = client.acquire("dead-line", 5s, fair()).value();
  Child dead = spawn(dlock_tool(*env, {"run", "--fair"}, "dead-line", "true"));
  await_waiters("dead-line", 1);
  Client behind_client = env->client();
  auto behind = std::async(std::launch::async, [&] { return behind_client.acquire("dead-line", 30s, fair()); });
  await_waiters("dead-line", 2);
  ::kill(dead.pid, SIGKILL);
  EXPECT_EQ(wait_exit(dead.pid, 5s), 128 + SIGKILL);
  const auto released = Clock::now();
  ASSERT_THAT(holder.release(), IsOk());
  auto got = behind.get();
  ASSERT_THAT(got.status(), IsOk()) << "the line stalled behind a dead waiter";
  const auto served_after = std::chrono::duration_cast<milliseconds>(Clock::now() - released);
  std::cout << "[measure] dead-waiter." << GetParam().name << ".served_after=" << served_after.count() << "ms"
            << std::endl;
  // The dead waiter may be handed the lock and keep it for its lease (600
  // ms) or session (2 s); the one behind must not sleep on to its own
  // heartbeat (a third of its 30 s lease).
  EXPECT_LT(served_after, 6s);
}

// A holder of each recipe that is paused past its lease (the dlock tool,
// SIGSTOPped while its CMD runs) is overtaken by a waiter with a larger
// fence, and is told when it wakes: CMD gets SIGTERM and dlock exits 79.
TEST_P(RecipeContract, AHolderPausedPastItsLeaseIsOvertakenAndToldWhenItWakes) {
  if (!env->lines()) GTEST_SKIP() << "refused (see above)";
  if (env->url().empty()) GTEST_SKIP() << "no server another program can reach";
  struct Case {
    std::vector<std::string> how;                                        // dlock's subcommand and flags
    std::function<std::uint64_t(Client&, const std::string&)> overtake;  // the fence taken, 0 if none
  };
  const std::vector<Case> cases = {
      {{"run", "--fair"},
       [](Client& c, const std::string& n) {
         auto l = c.acquire(n, 30s, fair());
         return l.ok() ? l->fence() : 0;
       }},
      {{"run", "--shared"},
       [](Client& c, const std::string& n) {
         SharedMutex w(c, n);
         return w.try_lock_for(30s) ? w.fence() : 0;
       }},
      {{"run", "--permits", "1"},
       [](Client& c, const std::string& n) {
         Semaphore s(c, n, 1);
         return s.try_acquire_for(30s) ? s.fences().front() : 0;
       }},
      {{"elect", "--id", "paused"},
       [](Client& c, const std::string& n) {
         auto l = Election(c, n, "usurper").campaign(30s);
         return l.ok() ? l->term() : 0;
       }},
  };
  TempDir dir;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string name = "paused" + std::to_string(i), started = dir.file(name + ".started");
    SCOPED_TRACE(join_args(cases[i].how));
    Child dlock = spawn(dlock_tool(*env, cases[i].how, name,
                                   "echo \"$DLOCK_FENCE $$\" > " + started + ".tmp; mv " + started + ".tmp " + started +
                                       "; exec sleep 60"),
                        {}, dir.file(name + ".out"));
    std::uint64_t fence = 0;
    pid_t cmd = 0;
    for (auto until = Clock::now() + 20s; Clock::now() < until && !(std::ifstream(started) >> fence >> cmd);)
      std::this_thread::sleep_for(10ms);
    ASSERT_GT(cmd, 0) << "CMD never started under the lock";
    ASSERT_EQ(::kill(dlock.pid, SIGSTOP), 0);
    const std::uint64_t taken = cases[i].overtake(client, name);
    EXPECT_GT(taken, fence) << "the paused holder's grant lapsed and a larger fence was granted";
    ::kill(dlock.pid, SIGCONT);
    const int code = wait_exit(dlock.pid, 30s);
    EXPECT_EQ(code, 79) << "dlock, woken, must report the loss";
    EXPECT_NE(::kill(cmd, 0), 0) << "CMD was ended when the loss was found";
    if (code == -1) ::kill(dlock.pid, SIGKILL), wait_exit(dlock.pid, 5s);
    ::kill(cmd, SIGKILL);
  }
}
#endif

INSTANTIATE_TEST_SUITE_P(Backends, RecipeContract, ::testing::ValuesIn(kBackends),
                         [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace dlock::test

// The etcd backend (etcd://) against a real 3-member cluster the test
// starts, and beside etcd's own lock: `etcdctl lock` and dlock exclude each
// other on the same name, both ways, and hand over in line.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <dlock/dlock.hpp>
#include <fstream>
#include <future>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "support/etcd_cluster.hpp"
#include "support/process.hpp"
#include "support/redis_server.hpp"
#include "support/tcp_fault.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

ClientOptions quiet() {
  ClientOptions o;
  o.logger = [](LogLevel, std::string_view) {};
  return o;
}

// The keys under `prefix` and their create revisions, oldest first.
std::vector<std::pair<std::string, std::uint64_t>> line_of(const test::EtcdCluster& etcd, const std::string& prefix) {
  return etcd.keys(prefix);
}

// Waits until `pred` or `limit`.
bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds limit = 10s) {
  for (const auto until = Clock::now() + limit; Clock::now() < until; std::this_thread::sleep_for(20ms))
    if (pred()) return true;
  return pred();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Etcd : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::etcd_available()) GTEST_SKIP() << "etcd is not installed";
    etcd = std::make_unique<test::EtcdCluster>(3);
  }
  Client client(const std::string& query = "") const { return client_of(etcd->url() + query); }
  static Client client_of(const std::string& url) {
    ClientOptions o = quiet();
    if (std::getenv("DLOCK_TEST_LOG"))
      o.logger = [](LogLevel, std::string_view m) { std::cerr << "log: " << m << "\n"; };
    return Client::connect(url, o);
  }

  std::unique_ptr<test::EtcdCluster> etcd;
};

TEST_F(Etcd, AGrantIsTheOldestKeyOfTheLineAndItsCreateRevisionIsTheFence) {
  Client c = client();
  auto a = c.try_acquire("job");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  const auto line = line_of(*etcd, "job/");
  ASSERT_EQ(line.size(), 1u) << "one key in the line";
  EXPECT_EQ(a->fence(), line[0].second) << "the fence is the key's create revision";
  auto info = c.inspect("job");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->fence, a->fence());
  EXPECT_FALSE(info->holder.empty()) << "the holder's description is in the key's value";
  auto listed = c.list();  // no prefix in the URL: the whole keyspace is read
  ASSERT_TRUE(listed.ok()) << listed.status().to_string();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->at(0).name, "job");
  const auto first = a->fence();
  ASSERT_TRUE(a->release().ok());
  EXPECT_TRUE(line_of(*etcd, "job/").empty()) << "a release deletes the key";
  auto b = c.try_acquire("job");
  ASSERT_TRUE(b.ok());
  EXPECT_GT(b->fence(), first) << "fences grow";
}

TEST_F(Etcd, AWaiterIsWokenByTheReleaseAndFencesGrowAcrossClients) {
  Client c1 = client(), c2 = client();
  auto held = c1.try_acquire("job");
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  EXPECT_EQ(c2.try_acquire("job").status().code(), Errc::busy) << "another client is refused while held";
  auto waiting = std::async(std::launch::async, [&] { return c2.acquire("job", 20s); });
  ASSERT_TRUE(eventually([&] { return line_of(*etcd, "job/").size() == 2; })) << "the waiter is in line";
  const auto fence = held->fence();
  const auto released_at = Clock::now();
  ASSERT_TRUE(held->release().ok());
  auto got = waiting.get();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_LT(Clock::now() - released_at, 2s) << "woken by its watch, not a poll";
  EXPECT_GT(got->fence(), fence);
}

// Clients taking turns on one lock as fast as they can: each release wakes
// the next in line, and a waiter's key name comes back (with a later create
// revision) every time its client takes the lock again. No waiter may miss
// the release it waits for, and no two hold at once.
TEST_F(Etcd, ClientsTakingTurnsFastNeverMissAReleaseNorOverlap) {
  constexpr int kClients = 3;
  std::vector<Client> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(client());
  std::atomic<int> inside{0}, overlaps{0}, turns{0};
  std::atomic<long long> worst_ms{0};
  std::vector<std::thread> threads;
  const auto end = Clock::now() + 3s;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      while (Clock::now() < end) {
        const auto t = Clock::now();
        auto held = clients[static_cast<std::size_t>(i)].acquire("turns", 10s);
        if (!held.ok()) {
          worst_ms = 1'000'000;
          return;
        }
        const long long waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
        if (waited > worst_ms) worst_ms = waited;
        if (inside.fetch_add(1) != 0) ++overlaps;
        ++turns;
        inside.fetch_sub(1);
        (void)held->release();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_GT(turns.load(), 30);
  EXPECT_LT(worst_ms.load(), 5000) << "a waiter missed the release it waited for";
  std::cout << "[measure] etcd.turns=" << turns.load() << " worst_wait_ms=" << worst_ms.load() << "\n";
}

// A plain release on the caller's thread deletes the key, and the hold's
// own watch may hear of the deletion before the I/O thread hears of the
// release: it was taken for a loss (2-3 of 100 cycles fired lost_token and
// counted leases_lost; "deleted while held" was logged 140 times in 150).
TEST_F(Etcd, APlainReleaseIsNeverReportedAsALoss) {
  std::atomic<int> deleted_logs{0};
  ClientOptions o = quiet();
  o.logger = [&](LogLevel, std::string_view m) {
    if (m.find("deleted while held") != std::string_view::npos) ++deleted_logs;
  };
  Client c = Client::connect(etcd->url(), o);
  int lost = 0;
  for (int i = 0; i < 80; ++i) {
    auto held = c.try_acquire("cycle");
    ASSERT_TRUE(held.ok()) << i << ": " << held.status().to_string();
    std::this_thread::sleep_for(60ms);  // held past kHoldWatchDelay: its key is watched
    ASSERT_TRUE(held->release().ok()) << i;
    std::this_thread::sleep_for(1ms);  // the watch's event may come in now
    if (held->lost_token().stop_requested()) ++lost;
  }
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(c.stats().leases_lost, 0u);
  EXPECT_EQ(deleted_logs.load(), 0);
}

// The blocking fast path (acquire and release on the caller's thread) from
// many threads of one client and of another at once, on few names, with
// tries and short waits: never two holders of a name, fences growing per
// name, and no key left behind.
TEST_F(Etcd, ManyThreadsOnTheFastPathNeverOverlapAndLeaveNoKey) {
  Client c1 = client(), c2 = client();
  constexpr int kNames = 3;
  std::atomic<int> inside[kNames] = {};
  std::atomic<std::uint64_t> last_fence[kNames] = {};
  std::atomic<int> overlaps{0}, backwards{0}, grants{0}, failures{0};
  const auto until = Clock::now() + 3s;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      Client& c = t % 2 ? c1 : c2;
      for (int i = 0; Clock::now() < until; ++i) {
        const int n = (t + i) % kNames;
        auto lease = c.acquire("fast" + std::to_string(n), std::chrono::milliseconds(i % 3 == 0 ? 0 : 50));
        if (!lease.ok()) {
          if (lease.status().code() != Errc::busy && lease.status().code() != Errc::timeout) ++failures;
          continue;
        }
        ++grants;
        if (inside[n].fetch_add(1) != 0) ++overlaps;
        const auto fence = lease->fence();
        if (last_fence[n].exchange(fence) >= fence) ++backwards;
        inside[n].fetch_sub(1);
        if (!lease->release().ok()) ++failures;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(backwards.load(), 0) << "a name's fences grow from grant to grant";
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(grants.load(), 50);
  for (int n = 0; n < kNames; ++n)
    EXPECT_TRUE(eventually([&] { return line_of(*etcd, "fast" + std::to_string(n) + "/").empty(); }))
        << "every key deleted: fast" << n;
}

// A lease outliving its client: the release after the close is refused,
// not sent on a closed channel; the key went with the client's lease.
TEST_F(Etcd, ALeaseReleasedAfterItsClientClosedIsRefusedAndItsKeyIsGone) {
  std::optional<Lease> kept;
  {
    Client c = client();
    auto a = c.try_acquire("outlives");
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    kept.emplace(std::move(*a));
  }
  const Status s = kept->release();
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(eventually([&] { return line_of(*etcd, "outlives/").empty(); })) << "revoked with the lease at close";
}

TEST_F(Etcd, DlockWaitsBehindEtcdctlLockAndIsGrantedWhenItEnds) {
  auto holder = etcd->etcdctl_spawn({"lock", "--ttl=2", "job", "--", "sleep", "30"}, "etcdctl-lock.out");
  ASSERT_TRUE(eventually([&] { return line_of(*etcd, "job/").size() == 1; })) << "etcdctl holds job";
  const auto theirs = line_of(*etcd, "job/")[0].second;
  Client c = client();
  EXPECT_EQ(c.try_acquire("job").status().code(), Errc::busy) << "etcdctl's hold excludes dlock";
  auto waiting = std::async(std::launch::async, [&] { return c.acquire("job", 30s); });
  ASSERT_TRUE(eventually([&] { return line_of(*etcd, "job/").size() == 2; }));
  ::kill(-holder.pid, SIGTERM);  // etcdctl and its command: it unlocks on its way out
  test::wait_exit(holder.pid, 10s);
  auto got = waiting.get();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_GT(got->fence(), theirs) << "the fence grows across etcdctl's grant and dlock's";
}

TEST_F(Etcd, EtcdctlLockWaitsBehindDlockAndIsGrantedAtItsRelease) {
  Client c = client();
  auto held = c.try_acquire("job");
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  auto waiter = etcd->etcdctl_spawn({"lock", "job", "--", "sh", "-c", "echo granted; sleep 30"}, "etcdctl-wait.out");
  ASSERT_TRUE(eventually([&] { return line_of(*etcd, "job/").size() == 2; })) << "etcdctl queued behind dlock";
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(slurp(etcd->dir() + "/etcdctl-wait.out").find("granted"), std::string::npos)
      << "dlock's hold excludes etcdctl";
  const auto fence = held->fence();
  ASSERT_TRUE(held->release().ok());
  EXPECT_TRUE(eventually([&] { return slurp(etcd->dir() + "/etcdctl-wait.out").find("granted") != std::string::npos; }))
      << "etcdctl is granted at dlock's release";
  const auto line = line_of(*etcd, "job/");
  ASSERT_EQ(line.size(), 1u);
  EXPECT_GT(line[0].second, fence);
  EXPECT_EQ(c.try_acquire("job").status().code(), Errc::busy) << "and it excludes dlock now";
  ::kill(-waiter.pid, SIGKILL);
  test::wait_exit(waiter.pid, 10s);
}

TEST_F(Etcd, DlockAndEtcdctlElectShareOneElection) {
  // etcdctl leads; dlock sees its proposal as the leader, and campaigns
  // behind it.
  auto theirs = etcd->etcdctl_spawn({"elect", "sched", "etcdctl-host"}, "etcdctl-elect.out");
  ASSERT_TRUE(eventually([&] { return line_of(*etcd, "sched/").size() == 1; })) << "etcdctl leads";
  Client c = client();
  Election e(c, "sched", "dlock-host");
  auto leader = e.leader();
  ASSERT_TRUE(leader.ok()) << leader.status().to_string();
  ASSERT_TRUE(leader->has_value());
  EXPECT_EQ((*leader)->id, "etcdctl-host") << "etcdctl's proposal is the leader's id";
  auto campaign = std::async(std::launch::async, [&] { return e.campaign(20s); });
  ASSERT_TRUE(eventually([&] { return line_of(*etcd, "sched/").size() == 2; })) << "dlock campaigns in line";
  ::kill(-theirs.pid, SIGTERM);  // etcdctl resigns on its way out
  test::wait_exit(theirs.pid, 10s);
  auto lead = campaign.get();
  ASSERT_TRUE(lead.ok()) << lead.status().to_string();
  // etcdctl's observer sees dlock's candidate id as the leader.
  auto observer = etcd->etcdctl_spawn({"elect", "-l", "sched"}, "etcdctl-observe.out");
  EXPECT_TRUE(eventually([&] {
    return slurp(etcd->dir() + "/etcdctl-observe.out").find("dlock-host") != std::string::npos;
  })) << slurp(etcd->dir() + "/etcdctl-observe.out");
  // And etcdctl waits behind dlock's leadership until it resigns.
  auto next = etcd->etcdctl_spawn({"elect", "sched", "etcdctl-next"}, "etcdctl-next.out");
  ASSERT_TRUE(eventually([&] { return line_of(*etcd, "sched/").size() == 2; }));
  EXPECT_EQ(slurp(etcd->dir() + "/etcdctl-next.out").find("etcdctl-next"), std::string::npos)
      << "not while dlock leads";
  ASSERT_TRUE(lead->resign().ok());
  EXPECT_TRUE(eventually([&] {
    return slurp(etcd->dir() + "/etcdctl-next.out").find("etcdctl-next") != std::string::npos;
  })) << "etcdctl leads once dlock resigned";
  for (auto* child : {&observer, &next}) {
    ::kill(-child->pid, SIGKILL);
    test::wait_exit(child->pid, 10s);
  }
}

TEST_F(Etcd, AKeyDeletedByAnOperatorIsALossToldAtOnce) {
  Client c = client();
  auto held = c.try_acquire("job");
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  const auto line = line_of(*etcd, "job/");
  ASSERT_EQ(line.size(), 1u);
  ASSERT_EQ(etcd->etcdctl({"del", line[0].first}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return held->lost(); }, 5s)) << "the holder is told";
  EXPECT_TRUE(held->lost_token().stop_requested());
}

TEST_F(Etcd, ALeaseRevokedByAnOperatorIsALossAndTheClientQueuesUnderANewOne) {
  Client c = client();
  auto held = c.try_acquire("job");
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  const auto line = line_of(*etcd, "job/");
  ASSERT_EQ(line.size(), 1u);
  const std::string lease = line[0].first.substr(4, line[0].first.find('_', 4) - 4);  // job/<lease in hex>[_...]
  ASSERT_EQ(etcd->etcdctl({"lease", "revoke", lease}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return held->lost(); }, 10s)) << "the holder is told";
  Result<Lease> again = Status(Errc::unavailable, "not yet");
  EXPECT_TRUE(eventually([&] { return (again = c.try_acquire("job")).ok(); }, 10s))
      << "a new lease serves the next acquire: " << again.status().to_string();
  if (again.ok()) {
    EXPECT_NE(line_of(*etcd, "job/").at(0).first, line[0].first) << "under another lease";
  }
}

TEST_F(Etcd, AWaiterWhoseOwnKeyIsDeletedIsWokenAndQueuesAgain) {
  Client c1 = client(), c2 = client();
  auto held = c1.try_acquire("job");
  ASSERT_TRUE(held.ok());
  auto waiting = std::async(std::launch::async, [&] { return c2.acquire("job", 20s); });
  ASSERT_TRUE(eventually([&] { return line_of(*etcd, "job/").size() == 2; }));
  const std::string mine = line_of(*etcd, "job/").at(1).first;
  ASSERT_EQ(etcd->etcdctl({"del", mine}).exit_code, 0);
  // Woken, it puts its key again (behind the holder): never waits on a key
  // that is gone.
  EXPECT_TRUE(eventually([&] {
    const auto line = line_of(*etcd, "job/");
    return line.size() == 2 && line[1].first == mine;
  })) << "queued again";
  ASSERT_TRUE(held->release().ok());
  auto got = waiting.get();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
}

// The child is forked before this process makes any etcd call (gRPC does
// not survive a fork of a process that used it: run alone, as ctest does).
TEST_F(Etcd, AHolderKilledFreesTheLockWhenItsLeaseEnds) {
  const std::string url = etcd->url() + "?session_timeout=2s";
  const pid_t child = test::fork_child([&] {
    Client c = Client::connect(url, quiet());
    auto held = c.try_acquire("job");
    if (!held.ok()) return 1;
    ::kill(::getpid(), SIGKILL);  // no release, no revoke: only the lease's end frees it
    return 2;
  });
  ASSERT_TRUE(eventually([&] { return line_of(*etcd, "job/").size() == 1; })) << "the child holds job";
  test::wait_exit(child, 10s);
  Client c = client();
  const auto start = Clock::now();
  auto got = c.acquire("job", 15s);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_LT(Clock::now() - start, 8s) << "granted once the dead holder's 2 s lease ended";
}

// A follower frozen (SIGSTOP) for longer than the lease, each in turn: the
// client's keep-alives, writes and watches go to the other members, so the
// hold is never lost, and the line still hands over.
TEST_F(Etcd, AFollowerFrozenPastTheLeaseNeitherLosesAHoldNorStallsTheLine) {
  Client c1 = client("?session_timeout=4s"), c2 = client("?session_timeout=4s");
  auto held = c1.try_acquire("job");
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  const auto fence = held->fence();
  const int leader = etcd->leader();
  ASSERT_GE(leader, 0);
  int follower = -1;
  for (int member = 0; member < 3; ++member) {
    if (member == leader) continue;
    follower = member;
    etcd->pause(member);
    std::this_thread::sleep_for(5s);  // past the 4 s lease
    EXPECT_FALSE(held->lost()) << "member " << member << " frozen: the lease is kept through the others";
    etcd->resume(member);
  }
  etcd->pause(follower);
  auto waiting = std::async(std::launch::async, [&] { return c2.acquire("job", 30s); });
  std::this_thread::sleep_for(1s);
  const auto released_at = Clock::now();
  EXPECT_TRUE(held->release().ok());
  auto got = waiting.get();
  etcd->resume(follower);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_GT(got->fence(), fence);
  std::cout << "[measure] etcd.frozen_follower.handover_ms="
            << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - released_at).count() << "\n";
}

// A client whose watch stream is on a member frozen (SIGSTOP) while the
// others go on: its watches hear nothing, and gRPC's pings drop the
// connection only 3 to 8 s later. The stream is probed; one unanswered
// within the bound moves every watch to another member.
class EtcdFrozenStream : public Etcd {
 protected:
  // Clients of the leader alone, and of the two followers (whose stream is
  // on one of them, frozen without losing quorum).
  void SetUp() override {
    Etcd::SetUp();
    if (IsSkipped()) return;
    leader = etcd->leader();
    ASSERT_GE(leader, 0);
    std::string followers;
    for (int m = 0; m < 3; ++m)
      if (m != leader) followers += (followers.empty() ? "" : ",") + etcd->endpoints()[static_cast<std::size_t>(m)];
    at_leader = "etcd://" + etcd->endpoints()[static_cast<std::size_t>(leader)] + "?session_timeout=4s";
    at_followers = "etcd://" + followers + "?session_timeout=4s";
  }
  // The follower serving the one watch stream there is (-1: none yet).
  int carrier() const {
    for (int m = 0; m < 3; ++m)
      if (m != leader && etcd->watch_streams(m) > 0) return m;
    return -1;
  }
  static long long ms_since(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
  }

  int leader = -1;
  std::string at_leader, at_followers;
};

TEST_F(EtcdFrozenStream, AWaiterIsWokenWithinTheBound) {
  Client holder = Client::connect(at_leader, quiet());
  auto held = holder.try_acquire("job");
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  Client waiter = client_of(at_followers);
  auto waiting = std::async(std::launch::async, [&] { return waiter.acquire("job", 30s); });
  ASSERT_TRUE(eventually([&] { return line_of(*etcd, "job/").size() == 2; })) << "the waiter queued";
  int frozen = -1;
  ASSERT_TRUE(eventually([&] { return (frozen = carrier()) >= 0; })) << "no stream on a follower";
  etcd->pause(frozen);
  const auto released_at = Clock::now();
  EXPECT_TRUE(held->release().ok());
  auto got = waiting.get();
  const auto woken_ms = ms_since(released_at);
  etcd->resume(frozen);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  std::cout << "[measure] etcd.frozen_stream.wake_ms=" << woken_ms << "\n";
  EXPECT_LT(woken_ms, 3500) << "woken within the probe's bound, not by gRPC's pings";
}

TEST_F(EtcdFrozenStream, AHolderIsToldOfAnOperatorsDeleteWithinTheBound) {
  Client holder = client_of(at_followers);
  auto held = holder.try_acquire("job");
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  std::this_thread::sleep_for(300ms);  // its key is watched by then
  int frozen = -1;
  ASSERT_TRUE(eventually([&] { return (frozen = carrier()) >= 0; })) << "no stream on a follower";
  etcd->pause(frozen);
  const auto line = line_of(*etcd, "job/");
  ASSERT_EQ(line.size(), 1u);
  ASSERT_EQ(etcd->etcdctl({"del", line[0].first}, 10s, leader).exit_code, 0);
  const auto deleted_at = Clock::now();
  const bool told = eventually([&] { return held->lost(); }, 10s);
  const auto told_ms = ms_since(deleted_at);
  etcd->resume(frozen);
  ASSERT_TRUE(told) << "the holder is told";
  std::cout << "[measure] etcd.frozen_stream.loss_told_ms=" << told_ms << "\n";
  EXPECT_LT(told_ms, 3500) << "told within the probe's bound, not by gRPC's pings";
}

// A slow member (each answer chunk 0.8 s late, behind a proxy) is not a frozen
// one when the command timeout allows for it (8 s): its stream's probes
// are answered late but in time, the watches stay, and the waiter on them
// is woken by the release.
TEST_F(Etcd, ASlowMemberIsNotTakenForAFrozenOne) {
  test::TcpFault slow(etcd->client_port(0));
  slow.delay_ms = 800;
  auto silent = std::make_shared<std::atomic<int>>(0);
  ClientOptions o = quiet();
  o.command_timeout = 8s;
  o.connect_timeout = 10s;
  o.logger = [silent](LogLevel, std::string_view m) {
    if (m.find("has said nothing") != std::string_view::npos) ++*silent;
  };
  Client waiter = Client::connect("etcd://127.0.0.1:" + std::to_string(slow.port()), o);
  Client holder = client();
  auto held = holder.try_acquire("job");
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  LockOptions patient;
  patient.error_retry = 30s;
  auto waiting = std::async(std::launch::async, [&] { return waiter.acquire("job", 30s, patient); });
  ASSERT_TRUE(eventually([&] { return line_of(*etcd, "job/").size() == 2; }, 15s)) << "the waiter queued";
  std::this_thread::sleep_for(4s);  // its stream is probed meanwhile
  EXPECT_TRUE(held->release().ok());
  auto got = waiting.get();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(silent->load(), 0) << "a late answer is not silence";
}

// Members named by host name, as docs/etcd.md shows them: with the first
// one down, the others serve (only the first name was ever used, and every
// call failed unavailable).
TEST_F(Etcd, MembersNamedByHostNameFailOverWhenTheFirstIsDown) {
  std::string hosts;
  for (int i = 0; i < 3; ++i) hosts += (i ? ",localhost:" : "localhost:") + std::to_string(etcd->client_port(i));
  const std::string by_name = "etcd://" + hosts + "?session_timeout=4s";
  Client before = Client::connect(by_name, quiet());
  ASSERT_TRUE(before.try_acquire("named")->release().ok());
  etcd->kill(0);
  for (int round = 0; round < 3; ++round) {
    auto held = before.acquire("named", 10s);
    ASSERT_TRUE(held.ok()) << "round " << round << ": " << held.status().to_string();
    EXPECT_TRUE(held->release().ok());
  }
  const auto t0 = Clock::now();
  Client after = Client::connect(by_name, quiet());
  auto held = after.acquire("named", 10s);
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  EXPECT_LT(Clock::now() - t0, 5s);
  EXPECT_TRUE(held->release().ok());
  etcd->start(0);
}

// A cluster without quorum (2 of 3 members gone): a connect's own lease
// grant goes unanswered. That is unavailable (the lease, if made, goes by
// itself), not outcome_unknown.
TEST_F(Etcd, ConnectingToAClusterWithoutQuorumIsUnavailable) {
  etcd->kill(1);
  etcd->kill(2);
  ClientOptions o = quiet();
  o.connect_timeout = 3s;
  o.command_timeout = 1s;
  try {
    Client c = Client::connect(etcd->url(), o);
    ADD_FAILURE() << "connected without quorum";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unavailable) << e.what();
  }
  etcd->start(1);
  etcd->start(2);
}

// The leader frozen past the lease: the others elect a new one, which
// keeps every lease for a full TTL from then on. A hold may still be lost
// (etcd 3.4's old leader, resumed, can revoke leases it saw lapse), but
// never silently: the holder is told, and the lock then goes to the waiter.
TEST_F(Etcd, ALeaderFrozenPastTheLeaseLosesNoHoldSilently) {
  Client c1 = client("?session_timeout=4s"), c2 = client("?session_timeout=4s");
  auto held = c1.try_acquire("job");
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  const int leader = etcd->leader();
  ASSERT_GE(leader, 0);
  etcd->pause(leader);
  std::this_thread::sleep_for(5s);
  etcd->resume(leader);
  std::this_thread::sleep_for(2s);
  const bool lost = held->lost();
  std::cout << "[measure] etcd.frozen_leader.hold_lost=" << lost << "\n";
  auto line = line_of(*etcd, "job/");
  if (lost) {
    EXPECT_TRUE(line.empty()) << "told lost: its key is gone";
  } else {
    ASSERT_EQ(line.size(), 1u) << "still held: its key is there";
    EXPECT_EQ(line[0].second, held->fence());
    EXPECT_TRUE(held->release().ok());
  }
  auto got = c2.acquire("job", 10s);
  EXPECT_TRUE(got.ok()) << got.status().to_string();
}

// Needs no cluster: refused before any connection, or none answers.
TEST(EtcdUrl, BadUrlsAreRefusedNamingWhy) {
  for (const char* url :
       {"etcd://", "etcd://h:0", "etcd://h?session_timeout=1500ms", "etcd://h?nope=1", "etcd://user@h"}) {
    auto c = Client::try_connect(url, quiet());
    ASSERT_FALSE(c.ok()) << url;
    EXPECT_EQ(c.status().code(), Errc::invalid_argument) << url << ": " << c.status().to_string();
  }
  auto c = Client::try_connect("etcd://127.0.0.1:1", [] {
    ClientOptions o = quiet();
    o.connect_timeout = 300ms;
    return o;
  }());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::unavailable) << c.status().to_string();
}

// An acquire whose put reaches a frozen member gives up at its deadline,
// and its key is deleted once the member answers: nothing stays behind.
// Its put may still land after that delete (a member cut from its leader
// forwards it late, while the delete went through another): the key is
// watched, and a put that lands late (here made by hand, under the same
// name) is deleted again rather than blocking the lock for as long as its
// client lives.
TEST(EtcdStray, AnAbandonedAcquiresKeyIsDeletedAndAPutThatLandsLateIsDeletedAgain) {
  if (!test::etcd_available()) GTEST_SKIP() << "etcd is not installed";
  test::EtcdCluster etcd(1);
  Client c = Client::connect(etcd.url(), quiet());
  auto warm = c.try_acquire("job");
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  const std::string warm_key = etcd.keys("job/").at(0).first;
  ASSERT_TRUE(warm->release().ok());
  etcd.pause(0);
  auto gave_up = c.acquire("job", 300ms);
  EXPECT_FALSE(gave_up.ok());
  std::this_thread::sleep_for(2500ms);  // the abandon's delete is refused meanwhile, and retried
  etcd.resume(0);
  EXPECT_TRUE(eventually([&] { return etcd.keys("job/").empty(); }, 5s)) << "the abandoned key was deleted";
  // The abandoned attempt's key, from the history of the line.
  const auto history = etcd.etcdctl({"watch", "--prefix", "job/", "--rev=1"}, 1500ms).out;
  std::string key;
  for (std::size_t at = history.find("PUT\n"); at != std::string::npos; at = history.find("PUT\n", at + 1)) {
    const auto from = at + 4;
    const std::string k = history.substr(from, history.find('\n', from) - from);
    if (k != warm_key) key = k;
  }
  if (key.empty()) {
    // Its put never landed (a frozen member may drop a request cancelled at
    // its deadline): the key it would have made is the next attempt's,
    // <lease>__<attempt + 1> (attempts are numbered per client).
    const auto sep = warm_key.rfind("__");
    ASSERT_NE(sep, std::string::npos) << warm_key;
    char next[24];
    std::snprintf(next, sizeof next, "%llx", std::stoull(warm_key.substr(sep + 2), nullptr, 16) + 1);
    key = warm_key.substr(0, sep + 2) + next;
  }
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(etcd.etcdctl({"put", key, ""}).exit_code, 0);  // the late put
  EXPECT_TRUE(eventually([&] { return etcd.keys("job/").empty(); }, 5s)) << "deleted again";
  Client other = Client::connect(etcd.url(), quiet());
  auto got = other.try_acquire("job");
  EXPECT_TRUE(got.ok()) << got.status().to_string();
}

// A release whose delete was not answered (the member frozen) leaves its
// key to be deleted again; the same name taken again meanwhile is a new
// key with a new fence, never the old one adopted (and then deleted by the
// retry under the new holder).
TEST(EtcdStray, ANameTakenAgainWhileItsReleaseIsUnansweredGetsANewKey) {
  if (!test::etcd_available()) GTEST_SKIP() << "etcd is not installed";
  test::EtcdCluster etcd(1);
  Client c = Client::connect(etcd.url(), quiet());
  auto first = c.try_acquire("job");
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  const auto fence = first->fence();
  etcd.pause(0);
  const Status released = first->release();
  etcd.resume(0);
  EXPECT_FALSE(released.ok()) << "a release the frozen member never answered is not reported done";
  auto again = c.acquire("job", 10s);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_GT(again->fence(), fence) << "a new key, not the old one adopted";
  std::this_thread::sleep_for(1500ms);  // the old key's delete is retried meanwhile
  EXPECT_FALSE(again->lost()) << "the retried delete did not remove the new holder's key";
  const auto line = etcd.keys("job/");
  ASSERT_EQ(line.size(), 1u);
  EXPECT_EQ(line[0].second, again->fence());
}

// With authentication on and tokens that expire after a second (simple
// tokens, --auth-token-ttl): a client idle past that is refused for its
// token, authenticates again and goes on, for its calls and for the watches
// its waiters set on a stream opened with the old token.
TEST(EtcdAuth, ExpiredTokensAreRenewedForCallsAndWatches) {
  if (!test::etcd_available()) GTEST_SKIP() << "etcd is not installed";
  test::EtcdCluster etcd(1, false, {"--auth-token-ttl", "1"});
  ASSERT_EQ(etcd.etcdctl({"user", "add", "root", "--new-user-password=s3cret"}).exit_code, 0);
  ASSERT_EQ(etcd.etcdctl({"auth", "enable"}).exit_code, 0);
  const std::string url = "etcd://root:s3cret@" + etcd.endpoint_list();
  auto refused = std::make_shared<std::atomic<int>>(0);
  ClientOptions logged = quiet();
  logged.logger = [refused](LogLevel, std::string_view m) {
    if (m.find("watch was refused") != std::string_view::npos) ++*refused;
  };
  Client holder = Client::connect(url, quiet()), waiter = Client::connect(url, logged);
  std::this_thread::sleep_for(2500ms);  // both tokens expired
  auto held = holder.try_acquire("job");
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  auto waiting = std::async(std::launch::async, [&] { return waiter.acquire("job", 20s); });
  std::this_thread::sleep_for(2500ms);  // the holder's token expired again
  const auto released_at = Clock::now();
  ASSERT_TRUE(held->release().ok());
  auto got = waiting.get();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_GT(refused->load(), 0)
      << "the waiter's watch, on a stream opened with the old token, was refused and set again";
  std::cout << "[measure] etcd.expired_token.watches_refused=" << refused->load() << " handover_ms="
            << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - released_at).count() << "\n";
}

// The holder's rights go while it holds (its role revoked; a changed
// password is refused the same way): its release is refused, and the key
// stayed for as long as its process lived, the lease kept alive by
// keep-alives that need no token. The lease is let go: the lock frees
// within one lease, and the holder is told.
// etcdctl against `etcd` (as root once auth is on), asserting it worked.
void ctl(const test::EtcdCluster& etcd, std::vector<std::string> args, bool as_root = true) {
  if (as_root) args.insert(args.begin(), "--user=root:s3cret");
  const auto r = etcd.etcdctl(args);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// Auth on: root (password s3cret) and user "app" (password app), whose
// role "locker" may read and write the keys under `prefix`.
void enable_auth(const test::EtcdCluster& etcd, const std::string& prefix) {
  ctl(etcd, {"user", "add", "root", "--new-user-password=s3cret"}, false);
  ctl(etcd, {"user", "add", "app", "--new-user-password=app"}, false);
  ctl(etcd, {"role", "add", "locker"}, false);
  ctl(etcd, {"role", "grant-permission", "locker", "--prefix=true", "readwrite", prefix}, false);
  ctl(etcd, {"user", "grant-role", "app", "locker"}, false);
  ctl(etcd, {"auth", "enable"}, false);
}

TEST(EtcdAuth, AHolderWhoseRightsWentLetsItsLeaseGo) {
  if (!test::etcd_available()) GTEST_SKIP() << "etcd is not installed";
  test::EtcdCluster etcd(1);
  auto as_root = [&](std::vector<std::string> args) { ctl(etcd, std::move(args)); };
  enable_auth(etcd, "");
  for (const bool fast : {true, false}) {
    SCOPED_TRACE(fast ? "released on the caller's thread" : "released through the I/O thread");
    Client holder = Client::connect("etcd://app:app@" + etcd.endpoint_list() + "?session_timeout=2s", quiet());
    Client waiter = Client::connect("etcd://root:s3cret@" + etcd.endpoint_list() + "?session_timeout=2s", quiet());
    auto held = holder.try_acquire("job");
    ASSERT_TRUE(held.ok()) << held.status().to_string();
    as_root({"user", "revoke-role", "app", "locker"});
    Status released;
    if (fast) {
      released = held->release();
    } else {
      std::promise<Status> p;
      holder.async_release(std::move(*held), [&](Status s) { p.set_value(std::move(s)); });
      released = p.get_future().get();
    }
    EXPECT_FALSE(released.ok());
    EXPECT_TRUE(released.code() == Errc::permission_denied || released.code() == Errc::auth_failed)
        << released.to_string();
    const auto t0 = Clock::now();
    auto got = waiter.acquire("job", 15s);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_LT(Clock::now() - t0, 4s) << "freed within one lease (2 s), not two or never";
    EXPECT_TRUE(got->release().ok());
    as_root({"user", "grant-role", "app", "locker"});
  }
}

// A user whose role covers only locks/ lists locks/ (the whole key space
// was read and filtered in the client: permission_denied).
TEST(EtcdAuth, AUserOfOnePrefixListsIt) {
  if (!test::etcd_available()) GTEST_SKIP() << "etcd is not installed";
  test::EtcdCluster etcd(1);
  enable_auth(etcd, "locks/");
  Client app = Client::connect("etcd://app:app@" + etcd.endpoint_list(), quiet());
  auto held = app.try_acquire("locks/a");
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  auto listed = app.list("locks/");
  ASSERT_TRUE(listed.ok()) << listed.status().to_string();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().name, "locks/a");
  EXPECT_EQ(app.list("other/").code(), Errc::permission_denied) << "outside its role: refused, as the server says";
}

// A holder cut off from every member (its proxy stalls): its keep-alives
// go unanswered, and it is told the lock is lost (unreachable) before the
// server's lease ends and another client is granted.
TEST(EtcdPartition, AHolderCutOffIsToldBeforeAnotherIsGranted) {
  if (!test::etcd_available()) GTEST_SKIP() << "etcd is not installed";
  test::EtcdCluster etcd(1);
  test::TcpFault proxy(std::stoi(etcd.endpoints()[0].substr(etcd.endpoints()[0].rfind(':') + 1)));
  Client cut = Client::connect("etcd://127.0.0.1:" + std::to_string(proxy.port()) + "?session_timeout=2s", quiet());
  Client other = Client::connect(etcd.url(), quiet());
  auto held = cut.try_acquire("job");
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  std::atomic<long long> told_at{0};
  std::stop_callback on_lost(held->lost_token(), [&] { told_at = Clock::now().time_since_epoch().count(); });
  proxy.stall();
  auto got = other.acquire("job", 15s);
  const long long granted_at = Clock::now().time_since_epoch().count();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_NE(told_at.load(), 0) << "the cut-off holder was never told";
  EXPECT_LT(told_at.load(), granted_at) << "told before another client was granted";
  EXPECT_GT(got->fence(), held->fence());
}

// etcd+tls://: the members' certificates verified against the URL's CA, a
// client certificate shown; another CA's is refused as a TLS failure.
TEST(EtcdTls, LocksOverTlsWithTheCertificatesVerifiedAndAWrongCaRefused) {
  if (!test::etcd_available()) GTEST_SKIP() << "etcd is not installed";
  test::EtcdCluster etcd(1, true);
  Client c = Client::connect(etcd.url(), quiet());
  auto held = c.try_acquire("job");
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  EXPECT_EQ(etcd.keys("job/").size(), 1u);
  ASSERT_TRUE(held->release().ok());
  const std::string other_ca = test::make_ca(etcd.dir(), "other");
  std::string wrong = etcd.url();
  wrong.replace(wrong.find("cacert=") + 7, wrong.find('&') - wrong.find("cacert=") - 7, other_ca);
  ClientOptions o = quiet();
  o.connect_timeout = 1s;
  auto refused = Client::try_connect(wrong, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Errc::tls_failed) << refused.status().to_string();
  auto plain = Client::try_connect("etcd://" + etcd.endpoint_list(), o);
  EXPECT_FALSE(plain.ok()) << "plain gRPC to a TLS member";
  auto missing = Client::try_connect("etcd+tls://" + etcd.endpoint_list() + "?cacert=/nonexistent/ca.crt", o);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Errc::invalid_argument) << missing.status().to_string();
}

// TLS mistakes are named (both said "no member of the cluster answered in
// time"), and gRPC's own lines (about 23 of them, from
// ssl_transport_security.cc) go to the client's logger, not to stderr.
TEST(EtcdTls, TlsMistakesAreNamedAndGrpcLinesGoToTheLogger) {
  if (!test::etcd_available()) GTEST_SKIP() << "etcd is not installed";
  test::EtcdCluster etcd(1, true);
  const std::string url = etcd.url();
  const auto at = url.find("cacert=") + 7;
  const std::string ca = url.substr(at, url.find('&', at) - at);
  std::atomic<int> grpc_lines{0};
  ClientOptions o = quiet();
  o.connect_timeout = 1s;
  o.logger = [&](LogLevel level, std::string_view m) {
    if (m.starts_with("etcd: grpc: ")) {
      EXPECT_EQ(level, LogLevel::debug);
      ++grpc_lines;
    }
  };
  // The members ask for a client certificate; none is given.
  auto no_cert = Client::try_connect("etcd+tls://" + etcd.endpoint_list() + "?cacert=" + ca, o);
  ASSERT_FALSE(no_cert.ok());
  EXPECT_EQ(no_cert.status().code(), Errc::tls_failed) << no_cert.status().to_string();
  EXPECT_NE(no_cert.status().message().find("no client certificate was given"), std::string::npos)
      << no_cert.status().to_string();
  EXPECT_GT(grpc_lines.load(), 0) << "gRPC's handshake lines reach the logger";
  // A cacert that is no certificate (here: a text file).
  const std::string not_pem = etcd.dir() + "/not-a-cert.txt";
  std::ofstream(not_pem) << "hello\n";
  auto bad_ca = Client::try_connect("etcd+tls://" + etcd.endpoint_list() + "?cacert=" + not_pem, o);
  ASSERT_FALSE(bad_ca.ok());
  EXPECT_EQ(bad_ca.status().code(), Errc::invalid_argument) << bad_ca.status().to_string();
  EXPECT_NE(bad_ca.status().message().find("cacert=" + not_pem + " holds no PEM certificate"), std::string::npos)
      << bad_ca.status().to_string();
}

// The connection drops and comes back after the store was compacted past
// the revisions the client watched from: its watches start again from a
// compacted revision, which etcd refuses. The client reads the keys again
// and watches from there: a hold still watches its key (an operator's
// delete is told), and a waiter still gets the lock.
TEST(EtcdCompaction, WatchesFromACompactedRevisionReadAgainAndWatchOn) {
  if (!test::etcd_available()) GTEST_SKIP() << "etcd is not installed";
  test::EtcdCluster etcd(1);
  test::TcpFault proxy(std::stoi(etcd.endpoints()[0].substr(etcd.endpoints()[0].rfind(':') + 1)));
  const std::string url = "etcd://127.0.0.1:" + std::to_string(proxy.port());
  auto compacted = std::make_shared<std::atomic<int>>(0);
  ClientOptions logged = quiet();
  logged.logger = [compacted](LogLevel, std::string_view m) {
    if (m.find("compacted") != std::string_view::npos) ++*compacted;
  };
  Client c1 = Client::connect(url, logged), c2 = Client::connect(url, quiet());
  auto held = c1.try_acquire("job");
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  auto waiting = std::async(std::launch::async, [&] { return c2.acquire("job", 30s); });
  ASSERT_TRUE(eventually([&] { return etcd.keys("job/").size() == 2; }));
  for (int i = 0; i < 5; ++i) ASSERT_EQ(etcd.etcdctl({"put", "other", std::to_string(i)}).exit_code, 0);
  const auto rev = etcd.etcdctl({"get", "other", "-w", "fields"}).out;
  const auto at = rev.find("\"Revision\" : ");
  ASSERT_NE(at, std::string::npos);
  const std::string revision = rev.substr(at + 13, rev.find('\n', at) - at - 13);
  ASSERT_EQ(etcd.etcdctl({"compact", revision}).exit_code, 0) << "compacted to " << revision;
  proxy.drop_connections();
  std::this_thread::sleep_for(3s);  // reconnected, every watch set again
  EXPECT_GT(compacted->load(), 0) << "the hold's watch started from a compacted revision";
  EXPECT_FALSE(held->lost()) << "a compacted watch is not a loss";
  ASSERT_EQ(etcd.etcdctl({"del", etcd.keys("job/").at(0).first}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return held->lost(); }, 5s)) << "the hold watches its key again";
  auto got = waiting.get();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
}

}  // namespace
}  // namespace dlock

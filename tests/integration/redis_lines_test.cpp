// Fair, shared and counted locks ("lines", core/lock_line.hpp) on a real
// redis-server, through the client, for what the decision table
// (tests/decisions/locks.table) cannot say: a hand-over reaching an idle
// waiter, a waiter timing out as the release arrives, a waiter whose
// process died, permits under contention, renewals and the line key's
// expiry.
#include <csignal>
#include <cstring>
#include <future>

#include "client_core.hpp"
#include "integration/common.hpp"
#include "redis/line_scripts.hpp"
#include "redis/scripts.hpp"

namespace dlock::test {
namespace {

// A Client and its core (shared and counted holds are internal calls).
struct LineClient {
  std::shared_ptr<detail::ClientCore> core;
  Client client;
};

LineClient line_client(const std::string& url, LogSink& log) {
  auto core = detail::ClientCore::connect(url, quiet(log));
  if (!core.ok()) throw std::runtime_error(core.status().to_string());
  auto c = detail::ClientFactory::make(*core);
  return {std::move(core.value()), std::move(c)};
}

Result<Lease> shared(const LineClient& c, const std::string& name, milliseconds wait, unsigned permits = 0,
                     LockOptions o = {}) {
  if (o.owner.empty()) o.owner = Client::random_owner();
  return detail::blocking_acquire(*c.core, name, wait, o, true, detail::Shape{detail::LockMode::shared, permits});
}

LockOptions fair(milliseconds lease = 10000ms) {
  LockOptions o;
  o.fair = true;
  o.watchdog_lease = lease;
  o.renew_interval = lease / 3;
  return o;
}

// An acquire running on the client's I/O thread, its outcome awaited.
struct Pending {
  std::shared_ptr<std::promise<Result<Lease>>> p = std::make_shared<std::promise<Result<Lease>>>();
  std::future<Result<Lease>> f = p->get_future();
  bool ready(milliseconds within) { return f.wait_for(within) == std::future_status::ready; }
};

Pending async_fair(const Client& c, const std::string& name, milliseconds wait, LockOptions o = fair()) {
  Pending p;
  c.async_acquire(name, wait, std::move(o), [q = p.p](Result<Lease> r) { q->set_value(std::move(r)); });
  return p;
}

Pending async_shared(const LineClient& c, const std::string& name, milliseconds wait, unsigned permits = 0) {
  Pending p;
  std::thread([&c, name, wait, permits, q = p.p] { q->set_value(shared(c, name, wait, permits)); }).detach();
  return p;
}

unsigned line_waiters(const Client& c, const std::string& name) {
  auto info = c.inspect(name);
  return info.ok() ? info->waiters.value_or(0) : 0;
}

long long evals(SyncRedis& r) {
  // "cmdstat_evalsha:calls=N,..." lines
  const std::string stats = r.cmd({"INFO", "commandstats"});
  long long n = 0;
  for (const char* cmd : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="}) {
    const auto at = stats.find(cmd);
    if (at != std::string::npos) n += std::stoll(stats.substr(at + std::strlen(cmd)));
  }
  return n;
}

// Only the fence counter is left.
bool clean(SyncRedis& r) {
  return eventually([&] { return r.integer({"DBSIZE"}) == 1; }, 3s);
}

class RedisLines : public ::testing::Test {
 protected:
  RedisServer server;
  SyncRedis redis{server.port()};
  LogSink log;
};

TEST_F(RedisLines, AHandOverReachesAnIdleWaiterWithoutAnotherAttempt) {
  auto holder = line_client(server.url(), log);
  auto waiter = line_client(server.url(), log);
  ASSERT_TRUE(holder.client.acquire("warm-up", 1s)->release().ok());  // the scripts are loaded
  auto held = holder.client.acquire("b", 1s, fair(30000ms));
  ASSERT_TRUE(held.ok());
  const auto held_fence = held->fence();
  auto p = async_fair(waiter.client, "b", 30s, fair(30000ms));  // heartbeat: every 10 s
  ASSERT_TRUE(eventually([&] { return line_waiters(holder.client, "b") == 1; }, 3s));
  std::this_thread::sleep_for(100ms);
  const long long before = evals(redis);
  const auto t0 = Clock::now();
  ASSERT_TRUE(held->release().ok());
  ASSERT_TRUE(p.ready(3s)) << "the hand-over did not reach the waiter";
  measure("lines.handover", ms_since(t0));
  auto lease = p.f.get();
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  EXPECT_EQ(evals(redis) - before, 1) << "only the release ran a script: the waiter sent no acquire";
  EXPECT_GT(lease->fence(), held_fence);
  auto info = holder.client.inspect("b");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->fence, lease->fence());
  EXPECT_EQ(info->waiters.value_or(99), 0u);
  ASSERT_TRUE(lease->release().ok());
  EXPECT_TRUE(clean(redis));
}

TEST_F(RedisLines, AWaiterThatTimesOutAsTheReleaseArrivesLeavesNothingHeld) {
  auto holder = line_client(server.url(), log);
  auto quitter = line_client(server.url(), log);
  auto next = line_client(server.url(), log);
  for (int offset : {-10, 0, 5, 10, 20}) {
    auto held = holder.client.acquire("c", 1s, fair());
    ASSERT_TRUE(held.ok());
    auto q = async_fair(quitter.client, "c", 300ms, fair(30000ms));  // an orphan would hold it 30 s
    ASSERT_TRUE(eventually([&] { return line_waiters(holder.client, "c") == 1; }, 3s));
    auto n = async_fair(next.client, "c", 20s);
    ASSERT_TRUE(eventually([&] { return line_waiters(holder.client, "c") == 2; }, 3s));
    std::this_thread::sleep_for(std::chrono::milliseconds(300 - 20 + offset));
    const auto t0 = Clock::now();
    ASSERT_TRUE(held->release().ok());
    ASSERT_TRUE(q.ready(5s));
    auto first = q.f.get();
    if (first.ok()) {
      ASSERT_TRUE(first->release().ok());
    } else {
      EXPECT_EQ(first.code(), Errc::timeout) << first.status().to_string();
    }
    ASSERT_TRUE(n.ready(3s)) << "offset " << offset << ": the next waiter was stalled";
    measure("lines.after_quitter", ms_since(t0));
    auto second = n.f.get();
    ASSERT_TRUE(second.ok()) << second.status().to_string();
    ASSERT_TRUE(second->release().ok());
  }
  EXPECT_TRUE(clean(redis));
}

TEST_F(RedisLines, AWaiterWhoseClientDiedDoesNotStallTheLine) {
  const std::string url = server.url();
  const int port = server.port();
  // The child queues once the lock is held, then is killed (fork before any
  // client exists in this process).
  pid_t child = fork_child([url, port] {
    SyncRedis r(port);
    const auto until = Clock::now() + 10s;
    while (r.integer({"EXISTS", "dlock:{d}"}) == 0)
      if (Clock::now() > until) return 2;
    Client c = Client::connect(url);
    auto l = c.acquire("d", 60s, fair(1000ms));
    return l.ok() ? 3 : 4;
  });
  auto holder = line_client(url, log);
  auto next = line_client(url, log);
  auto held = holder.client.acquire("d", 1s, fair(10000ms));
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(eventually([&] { return line_waiters(holder.client, "d") == 1; }, 5s)) << "the child queued";
  auto n = async_fair(next.client, "d", 20s, fair(1000ms));
  ASSERT_TRUE(eventually([&] { return line_waiters(holder.client, "d") == 2; }, 3s));
  ::kill(child, SIGKILL);
  EXPECT_EQ(wait_exit(child, 5s), 128 + SIGKILL);
  const auto t0 = Clock::now();
  ASSERT_TRUE(held->release().ok());  // hands over to the dead child first (its place was still live)
  ASSERT_TRUE(n.ready(4s)) << "the line stalled on the dead waiter";
  measure("lines.after_dead_waiter", ms_since(t0));
  auto lease = n.f.get();
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  ASSERT_TRUE(lease->release().ok());
  EXPECT_TRUE(clean(redis));
}

TEST_F(RedisLines, ASemaphoreNeverHasMoreHoldersThanPermits) {
  auto probe = line_client(server.url(), log);
  std::vector<LineClient> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(line_client(server.url(), log));
  std::vector<Lease> held;
  for (int i = 0; i < 3; ++i) {
    auto l = shared(clients[i], "f", 1s, 3);
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    held.push_back(std::move(*l));
  }
  auto fourth = async_shared(clients[3], "f", 20s, 3);
  ASSERT_TRUE(eventually([&] { return line_waiters(probe.client, "f") == 1; }, 3s));
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(fourth.ready(0ms)) << "a 4th holder of 3 permits";
  EXPECT_EQ(probe.client.inspect("f")->holders, 3u);

  auto wrong = shared(probe, "f", 0ms, 2);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.code(), Errc::invalid_argument) << wrong.status().to_string();
  auto read_lock = shared(probe, "f", 0ms, 0);
  ASSERT_FALSE(read_lock.ok());
  EXPECT_EQ(read_lock.code(), Errc::invalid_argument) << read_lock.status().to_string();

  ASSERT_TRUE(held.back().release().ok());
  held.pop_back();
  ASSERT_TRUE(fourth.ready(3s));
  auto l4 = fourth.f.get();
  ASSERT_TRUE(l4.ok()) << l4.status().to_string();
  EXPECT_EQ(probe.client.inspect("f")->holders, 3u);
  ASSERT_TRUE(l4->release().ok());
  for (auto& l : held) ASSERT_TRUE(l.release().ok());

  // Under contention: 6 threads, 3 permits, counted in the critical section.
  std::atomic<int> inside{0}, most{0}, errors{0};
  std::vector<std::thread> threads;
  std::vector<LineClient> more;
  for (int t = 0; t < 6; ++t) more.push_back(line_client(server.url(), log));
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 15; ++k) {
        auto l = shared(more[t], "g", 20s, 3);
        if (!l.ok()) {
          ++errors;
          continue;
        }
        const int now = ++inside;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(2ms);
        --inside;
        if (!l->release().ok()) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_LE(most.load(), 3);
  EXPECT_GE(most.load(), 2) << "the permits were never shared";
  EXPECT_TRUE(clean(redis));
}

TEST_F(RedisLines, SharedHoldsAreRenewedAndAbandonedWaitersLeaveTheLine) {
  auto a = line_client(server.url(), log);
  auto b = line_client(server.url(), log);
  LockOptions o;
  o.watchdog_lease = 1000ms;
  o.renew_interval = 300ms;
  auto r = shared(a, "i", 1s, 0, o);
  ASSERT_TRUE(r.ok());
  LockOptions named = fair(1000ms);
  named.holder = "candidate-7";
  auto x = a.client.acquire("j", 1s, named);  // a fair exclusive hold beside it
  ASSERT_TRUE(x.ok());
  auto p = a.client.acquire("k", 1s, o);  // and a plain one: renewal batches mix them
  ASSERT_TRUE(p.ok());
  std::this_thread::sleep_for(2500ms);  // well past the leases: renewed
  EXPECT_FALSE(r->lost());
  EXPECT_FALSE(x->lost());
  EXPECT_FALSE(p->lost());
  EXPECT_EQ(b.client.inspect("j")->holder, "candidate-7");
  EXPECT_FALSE(b.client.inspect("j")->shared);
  auto info = b.client.inspect("i");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->holders, 1u);
  // Waiters that give up leave no place behind.
  auto w1 = b.client.acquire("j", 300ms, fair());
  EXPECT_EQ(w1.code(), Errc::timeout);
  auto w2 = b.client.acquire("i", 300ms, fair());
  EXPECT_EQ(w2.code(), Errc::timeout);
  EXPECT_EQ(line_waiters(b.client, "i"), 0u);
  EXPECT_EQ(line_waiters(b.client, "j"), 0u);
  ASSERT_TRUE(r->release().ok());
  ASSERT_TRUE(x->release().ok());
  ASSERT_TRUE(p->release().ok());
  EXPECT_TRUE(clean(redis));
}

// The scripts alone: what they store, how long it lives, a mixed renewal.
class RedisLineScripts : public ::testing::Test {
 protected:
  // Fences counted from a counter already raised to the clock: kBase + n.
  void SetUp() override { redis.cmd({"SET", "dlock:fence", std::to_string(kBase)}); }
  static constexpr long long kBase = 1000000000000LL;
  static std::string granted(int fence) { return "1\n" + std::to_string(kBase + fence) + "\n1"; }
  static std::string key(const std::string& n) { return "dlock:{" + n + "}"; }
  std::string plain(const std::string& n, const std::string& owner, int lease) {
    return redis.cmd({"EVAL", std::string(redis::acquire_script().body), "4", key(n), "dlock:fence",
                      key(n) + ":t:" + owner, key(n) + ":q", owner, std::to_string(lease), "0", "0", key(n) + ":wake"});
  }
  std::string line(const std::string& n, const std::string& owner, int lease, const std::string& mode,
                   bool queued = true) {
    return redis.cmd({"EVAL", std::string(redis::line_acquire_script().body), "4", key(n), "dlock:fence",
                      key(n) + ":t:" + owner, key(n) + ":q", owner, std::to_string(lease), "0", mode, "0",
                      queued ? "1" : "0", "", key(n) + ":wake"});
  }
  std::string renew(const std::vector<std::string>& keys, const std::vector<std::string>& args) {
    std::vector<std::string> c{"EVAL", std::string(redis::renew_script().body), std::to_string(keys.size())};
    c.insert(c.end(), keys.begin(), keys.end());
    c.insert(c.end(), args.begin(), args.end());
    return redis.cmd(c);
  }
  RedisServer server;
  SyncRedis redis{server.port()};
};

TEST_F(RedisLineScripts, TheLineKeyExpiresWithItsLatestEntry) {
  EXPECT_EQ(line("m", "A/B", 5000, "x"), granted(1));
  EXPECT_EQ(line("m", "C/B", 800, "x"), "0\n266\n0") << "queued: told to come back within a third of its lease";
  const long long ttl = redis.integer({"PTTL", key("m") + ":q"});
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 800);
  EXPECT_EQ(redis.cmd({"HGET", key("m"), "q"}), "1") << "the holder is marked: its release hands over";
  std::this_thread::sleep_for(900ms);  // the waiter's place ran out, unrenewed
  EXPECT_EQ(redis.integer({"EXISTS", key("m") + ":q"}), 0);
}

TEST_F(RedisLineScripts, ARenewalBatchMixesPlainAndLineHolds) {
  EXPECT_EQ(plain("p", "P/A", 1000), granted(1));
  EXPECT_EQ(line("s", "S/A", 1000, "s"), granted(2));
  EXPECT_EQ(line("x", "X/A", 1000, "x"), granted(3));
  EXPECT_EQ(line("x", "W/A", 1000, "x"), "0\n333\n0");
  EXPECT_EQ(renew({key("p"), key("s"), key("s") + ":q", key("x"), key("x") + ":q", key("x"), key("x") + ":q", key("s"),
                   key("s") + ":q", key("p")},
                  {"P/A", "60000", "p", "S/A", "60000", "l", "X/A", "60000", "l", "W/A", "60000", "l", "G/A", "60000",
                   "l", "Q/A", "60000", "p"}),
            "1\n1\n1\n1\n0\n2");
  EXPECT_GT(redis.integer({"PTTL", key("p")}), 30000);
  EXPECT_GT(redis.integer({"PTTL", key("s") + ":q"}), 30000);
  EXPECT_GT(redis.integer({"PTTL", key("x")}), 30000);
  EXPECT_GT(redis.integer({"PTTL", key("x") + ":q"}), 30000) << "the waiter's place was renewed";
}

}  // namespace
}  // namespace dlock::test

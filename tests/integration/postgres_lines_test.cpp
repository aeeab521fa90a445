// Lines on PostgreSQL (core/lock_line.hpp): fair, shared and counted locks
// against a real cluster per test, through the client, for what the
// decision table (tests/decisions/locks.table) cannot say: hand-overs,
// races, dead and stopped waiters, contention, inspect's holder, migration. Shared and counted holds go through the
// core's internal blocking acquire (detail::Shape) until their public
// classes land; fair exclusive locks are public (LockOptions::fair).
#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>

#include "client_core.hpp"
#include "integration/common.hpp"
#include "support/postgres_server.hpp"

namespace dlock::test {
namespace {

// A Client and the core under it (for shared and counted acquires).
struct LineClient {
  std::shared_ptr<detail::ClientCore> core;
  Client client;

  LineClient(const std::string& url, LogSink& log)
      : core(detail::ClientCore::connect(url, quiet(log)).value()), client(detail::ClientFactory::make(core)) {}

  Result<Lease> shared(const std::string& name, milliseconds wait, unsigned permits = 0, LockOptions o = {}) {
    const bool fresh = o.owner.empty();  // as Client::acquire: a new owner holds nothing here yet
    if (fresh) o.owner = Client::random_owner();
    return detail::blocking_acquire(*core, name, wait, o, fresh, detail::Shape{detail::LockMode::shared, permits});
  }
  Result<Lease> fair(const std::string& name, milliseconds wait, LockOptions o = {}) {
    o.fair = true;
    return client.acquire(name, wait, o);
  }
  LockInfo info(const std::string& name) { return client.inspect(name).value(); }
  unsigned waiters(const std::string& name) { return info(name).waiters.value_or(0); }
};

// (b) A release hands the lock to an idle waiter: it is granted by the
// hand-over's NOTIFY alone, without sending another acquire.
TEST(PostgresLines, AHandOverReachesAnIdleWaiterWithoutAnotherAcquire) {
  PostgresServer pg;
  LogSink log;
  LineClient holder(pg.url(), log), waiter(pg.url(), log);
  auto held = holder.fair("b", 0ms);
  ASSERT_TRUE(held.ok());
  std::atomic<std::uint64_t> sent_before{0};
  std::promise<void> go;
  auto got = std::async(std::launch::async, [&] { return waiter.fair("b", 30s); });  // lease 30 s: beat 10 s
  ASSERT_TRUE(eventually([&] { return holder.waiters("b") == 1; }, 5s));
  std::this_thread::sleep_for(300ms);  // idle: its attempt answered, waiting on LISTEN
  sent_before = waiter.client.stats().commands_sent;
  const auto released = Clock::now();
  ASSERT_TRUE(held->release().ok());
  ASSERT_EQ(got.wait_for(5s), std::future_status::ready);
  auto lease = got.get();
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  const auto took = ms_since(released);
  EXPECT_EQ(waiter.client.stats().commands_sent, sent_before.load()) << "the waiter sent a command to get it";
  EXPECT_LT(took, 3000) << "granted by its heartbeat, not by the hand-over";
  measure("pg_line_handover_ms", took);
  const LockInfo info = holder.info("b");
  EXPECT_TRUE(info.held);
  EXPECT_EQ(info.fence, lease->fence());
  EXPECT_TRUE(lease->release().ok());
}

// (c) A waiter whose wait ends as the release arrives (before or after the
// hand-over) leaves nothing held and nothing in line.
TEST(PostgresLines, AWaiterTimingOutAsAReleaseArrivesLeavesNothingHeld) {
  PostgresServer pg;
  LogSink log;
  LineClient holder(pg.url(), log), waiter(pg.url(), log), third(pg.url(), log);
  int granted = 0, timed_out = 0;
  for (int i = 0; i < 12; ++i) {
    const std::string name = "c" + std::to_string(i);
    auto held = holder.fair(name, 0ms);
    ASSERT_TRUE(held.ok());
    auto got = std::async(std::launch::async, [&] { return waiter.fair(name, 300ms); });
    std::this_thread::sleep_for(milliseconds(285 + 3 * i));  // around the waiter's deadline
    ASSERT_TRUE(held->release().ok());
    auto lease = got.get();
    if (lease.ok()) {
      ++granted;
      EXPECT_TRUE(lease->release().ok());
    } else {
      ++timed_out;
      EXPECT_EQ(lease.status().code(), Errc::timeout) << lease.status().to_string();
    }
    EXPECT_TRUE(eventually(
        [&] {
          const LockInfo info = third.info(name);
          return !info.held && info.waiters.value_or(0) == 0;
        },
        3s))
        << name << " stayed held or queued";
    auto free = third.client.try_acquire(name);
    EXPECT_TRUE(free.ok()) << name << ": " << free.status().to_string();
  }
  std::cout << "granted " << granted << ", timed out " << timed_out << "\n";
}

// (d) A waiter whose process dies (or stops: its connections stay open)
// keeps the line only until its lease ends (its place, or the hold it was
// handed, expires by server time).
void dead_waiter_does_not_stall_the_line(int sig) {
  PostgresServer pg;
  const std::string url = pg.url(), go = pg.dir() + "/go";
  pid_t child = fork_child([&] {  // forked before this process makes a client
    while (!std::filesystem::exists(go)) std::this_thread::sleep_for(5ms);
    LogSink log;
    LineClient c(url, log);
    auto lease = c.fair("d", 60s, fast_watchdog(1000ms, 300ms));
    std::this_thread::sleep_for(60s);
    return 0;
  });
  struct Reap {  // on every way out, a failed assertion's too
    pid_t pid;
    ~Reap() {
      ::kill(pid, SIGKILL);
      wait_exit(pid, 5s);
    }
  } reap{child};
  LogSink log;
  LineClient holder(url, log), next(url, log);
  auto held = holder.fair("d", 0ms);
  ASSERT_TRUE(held.ok());
  std::ofstream(go) << 1;
  ASSERT_TRUE(eventually([&] { return holder.waiters("d") == 1; }, 10s));
  auto got = std::async(std::launch::async, [&] { return next.fair("d", 30s, fast_watchdog(1000ms, 300ms)); });
  ASSERT_TRUE(eventually([&] { return holder.waiters("d") == 2; }, 5s));
  ::kill(child, sig);
  const auto released = Clock::now();
  ASSERT_TRUE(held->release().ok());  // handed to the dead waiter (its place is still live)
  ASSERT_EQ(got.wait_for(5s), std::future_status::ready) << "the line stalled on a dead waiter";
  auto lease = got.get();
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  const auto took = ms_since(released);
  EXPECT_LT(took, 2500) << "a 1 s lease plus a heartbeat";
  measure(sig == SIGKILL ? "pg_line_killed_waiter_ms" : "pg_line_stopped_waiter_ms", took);
  EXPECT_TRUE(lease->release().ok());
}

TEST(PostgresLines, AKilledWaiterDoesNotStallTheLineBeyondItsLease) { dead_waiter_does_not_stall_the_line(SIGKILL); }

TEST(PostgresLines, AStoppedWaiterDoesNotStallTheLineBeyondItsLease) { dead_waiter_does_not_stall_the_line(SIGSTOP); }

// (e) Readers overlap; a writer waits for them; readers that arrive while
// the writer waits queue behind it.
TEST(PostgresLines, ReadersOverlapAndAWaitingWriterIsNotStarved) {
  PostgresServer pg;
  LogSink log;
  LineClient r1(pg.url(), log), r2(pg.url(), log), r3(pg.url(), log), w(pg.url(), log);
  auto a = r1.shared("rw", 0ms);
  auto b = r2.shared("rw", 0ms);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  LockInfo info = w.info("rw");
  EXPECT_TRUE(info.held);
  EXPECT_TRUE(info.shared);
  EXPECT_EQ(info.holders, 2u);
  EXPECT_EQ(info.fence, a->fence()) << "the oldest grant speaks for the lock";
  auto writer = std::async(std::launch::async, [&] { return w.fair("rw", 30s); });
  ASSERT_TRUE(eventually([&] { return w.waiters("rw") == 1; }, 5s));
  EXPECT_EQ(r3.shared("rw", 0ms).status().code(), Errc::busy) << "a reader jumped the waiting writer";
  auto reader = std::async(std::launch::async, [&] { return r3.shared("rw", 30s); });
  ASSERT_TRUE(eventually([&] { return w.waiters("rw") == 2; }, 5s));
  ASSERT_TRUE(a->release().ok());
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(writer.wait_for(0ms), std::future_status::timeout) << "the writer got in beside a reader";
  ASSERT_TRUE(b->release().ok());
  ASSERT_EQ(writer.wait_for(5s), std::future_status::ready);
  auto wl = writer.get();
  ASSERT_TRUE(wl.ok()) << wl.status().to_string();
  info = w.info("rw");
  EXPECT_FALSE(info.shared);
  EXPECT_EQ(info.holders, 1u);
  EXPECT_EQ(info.waiters, 1u);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(reader.wait_for(0ms), std::future_status::timeout) << "a reader got in beside the writer";
  const std::uint64_t writer_fence = wl->fence();
  ASSERT_TRUE(wl->release().ok());
  ASSERT_EQ(reader.wait_for(5s), std::future_status::ready);
  auto rl = reader.get();
  ASSERT_TRUE(rl.ok()) << rl.status().to_string();
  EXPECT_GT(rl->fence(), writer_fence);
  EXPECT_TRUE(rl->release().ok());
}

// (f) Three permits never make a fourth holder; a caller that disagrees on
// the permits is refused.
TEST(PostgresLines, ThreePermitsNeverGiveAFourthHolder) {
  PostgresServer pg;
  LogSink log;
  constexpr int kClients = 6, kRounds = 8;
  std::vector<std::unique_ptr<LineClient>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(std::make_unique<LineClient>(pg.url(), log));
  std::atomic<int> inside{0}, most{0}, errors{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      for (int r = 0; r < kRounds; ++r) {
        auto lease = clients[i]->shared("sem", 30s, 3);
        if (!lease.ok()) {
          ++errors;
          continue;
        }
        const int now = ++inside;
        for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
        }
        std::this_thread::sleep_for(15ms);
        --inside;
        if (!lease->release().ok()) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_LE(most.load(), 3);
  EXPECT_GE(most.load(), 2) << "the permits were never shared";
  auto held = clients[0]->shared("sem", 0ms, 3);
  ASSERT_TRUE(held.ok());
  auto other = clients[1]->shared("sem", 0ms, 2);
  EXPECT_EQ(other.status().code(), Errc::invalid_argument) << other.status().to_string();
  auto unlimited = clients[1]->shared("sem", 0ms, 0);
  EXPECT_EQ(unlimited.status().code(), Errc::invalid_argument) << unlimited.status().to_string();
  EXPECT_TRUE(held->release().ok());
}

// inspect shows what a line's holder said of itself (LockOptions::holder),
// the oldest grant speaking for the lock, and its waiters.
TEST(PostgresLines, InspectShowsTheHolderAndTheLine) {
  PostgresServer pg;
  LogSink log;
  LineClient a(pg.url(), log), b(pg.url(), log);
  LockOptions o;
  o.holder = "candidate-7";
  auto fair = a.fair("leader", 0ms, o);
  ASSERT_TRUE(fair.ok());
  auto waiting = std::async(std::launch::async, [&] { return b.fair("leader", 30s); });
  ASSERT_TRUE(eventually([&] { return a.waiters("leader") == 1; }, 5s));
  LockInfo info = a.info("leader");
  EXPECT_TRUE(info.held);
  EXPECT_EQ(info.holder, "candidate-7");
  EXPECT_EQ(info.holders, 1u);
  EXPECT_FALSE(info.shared);
  EXPECT_EQ(info.fence, fair->fence());
  ASSERT_TRUE(fair->release().ok());
  auto next = waiting.get();
  ASSERT_TRUE(next.ok());
  info = a.info("leader");
  // b asked for no holder text: its description (PROGRAM[PID]@HOST).
  EXPECT_NE(info.holder.find("[" + std::to_string(::getpid()) + "]@"), std::string::npos) << info.holder;
  ASSERT_TRUE(info.held_for.has_value());
  // The line is empty again, and no plain waiter queues.
  EXPECT_EQ(info.waiters.value_or(99), 0u);
  EXPECT_TRUE(next->release().ok());
  LockOptions r;
  r.holder = "reader-1";
  auto reader = a.shared("leader", 0ms, 0, r);
  ASSERT_TRUE(reader.ok());
  info = b.info("leader");
  EXPECT_EQ(info.holder, "reader-1");
  EXPECT_TRUE(info.shared);
  EXPECT_TRUE(reader->release().ok());
  info = b.info("leader");
  EXPECT_FALSE(info.held);
  EXPECT_EQ(pg.psql("SELECT count(*) FROM dlock_locks"), "0\n") << "a free row outlived its line";
}

// Plain, fair and shared callers of one name, at once: no writer ever beside
// anyone, every call granted, nothing left behind.
TEST(PostgresLines, MixedCallersOfOneNameKeepExclusion) {
  PostgresServer pg;
  LogSink log;
  constexpr int kClients = 6, kRounds = 15;
  std::vector<std::unique_ptr<LineClient>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(std::make_unique<LineClient>(pg.url(), log));
  std::atomic<int> writers{0}, readers{0}, violations{0}, errors{0}, granted{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      for (int r = 0; r < kRounds; ++r) {
        const int kind = (i + r) % 3;  // 0 plain, 1 fair, 2 shared
        auto lease = kind == 0   ? clients[i]->client.acquire("mix", 30s)
                     : kind == 1 ? clients[i]->fair("mix", 30s)
                                 : clients[i]->shared("mix", 30s);
        if (!lease.ok()) {
          ++errors;
          std::cerr << lease.status().to_string() << "\n";
          continue;
        }
        ++granted;
        if (kind == 2) {
          ++readers;
          if (writers.load() != 0) ++violations;
        } else {
          if (++writers != 1 || readers.load() != 0) ++violations;
        }
        std::this_thread::sleep_for(3ms);
        if (kind == 2)
          --readers;
        else
          --writers;
        if (!lease->release().ok()) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(granted.load(), kClients * kRounds);
  EXPECT_TRUE(eventually([&] { return pg.psql("SELECT count(*) FROM dlock_locks_line") == "0\n"; }, 3s));
  EXPECT_EQ(pg.psql("SELECT count(*) FROM dlock_locks WHERE expires_at > clock_timestamp()"), "0\n");
}

// The asynchronous path (I/O thread), and renewal batches that mix plain
// and line holds: both are kept past several leases.
TEST(PostgresLines, AsyncAcquiresAndMixedRenewalsKeepTheirHolds) {
  PostgresServer pg;
  LogSink log;
  LineClient c(pg.url(), log), other(pg.url(), log);
  std::promise<Result<Lease>> p;
  LockOptions o = fast_watchdog(600ms, 150ms);
  o.fair = true;
  c.client.async_acquire("async-fair", 5s, o, [&](Result<Lease> r) { p.set_value(std::move(r)); });
  auto fair = p.get_future().get();
  ASSERT_TRUE(fair.ok()) << fair.status().to_string();
  auto plain = c.client.acquire("mixed-plain", 0ms, fast_watchdog(600ms, 150ms));
  auto reader = c.shared("mixed-shared", 0ms, 2, fast_watchdog(600ms, 150ms));
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(reader.ok());
  std::this_thread::sleep_for(2s);
  for (const char* name : {"async-fair", "mixed-plain", "mixed-shared"}) {
    EXPECT_TRUE(other.info(name).held) << name;
    EXPECT_EQ(other.client.try_acquire(name).status().code(), Errc::busy) << name;
  }
  EXPECT_FALSE(fair->lost());
  EXPECT_FALSE(plain->lost());
  EXPECT_FALSE(reader->lost());
  EXPECT_GE(c.client.stats().renewal_round_trips, 5u);
  EXPECT_TRUE(fair->release().ok());
  EXPECT_TRUE(plain->release().ok());
  EXPECT_TRUE(reader->release().ok());
  EXPECT_FALSE(other.info("mixed-shared").held);
}

// (i) A table of schema version 2 (no lines) is migrated in place, its
// locks kept, and lines work on it.
TEST(PostgresLines, AVersion2TableIsMigrated) {
  PostgresServer pg;
  LogSink log;
  auto first = Client::connect(pg.url(), quiet(log));
  auto held = first.acquire("job", 0ms);
  ASSERT_TRUE(held.ok());
  // Back to version 2's objects: no line tables, functions or info column.
  pg.psql(
      "DROP FUNCTION dlock_locks_line_acquire, dlock_locks_line_release, dlock_locks_line_abandon, "
      "dlock_locks_line_renew, dlock_locks_line_settle, dlock_locks_line_mark; DROP TABLE dlock_locks_line, "
      "dlock_locks_line_tombs; "
      "DROP SEQUENCE dlock_locks_ticket; ALTER TABLE dlock_locks DROP COLUMN info, DROP COLUMN line; "
      "UPDATE dlock_locks_meta SET value = 2");
  LineClient second(pg.url(), log);
  EXPECT_EQ(pg.psql("SELECT value FROM dlock_locks_meta"), "7\n");
  EXPECT_EQ(second.client.try_acquire("job").status().code(), Errc::busy) << "the held lock survived";
  auto queued = std::async(std::launch::async, [&] { return second.fair("job", 30s); });
  ASSERT_TRUE(eventually([&] { return second.waiters("job") == 1; }, 5s));
  ASSERT_TRUE(held->release().ok());  // a plain release hands over to the line
  ASSERT_EQ(queued.wait_for(5s), std::future_status::ready);
  auto got = queued.get();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_TRUE(got->release().ok());
}

}  // namespace
}  // namespace dlock::test

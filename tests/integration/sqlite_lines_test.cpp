// Fair, shared and counted locks ("lines") on the SQLite backend, on real
// files shared by several Clients and processes, for what the decision table
// (tests/decisions/locks.table) cannot say: waiters that time out as the
// release arrives or die, readers in other processes, permits under
// contention, and a file of the previous schema upgraded in place.
#include <signal.h>
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <future>
#include <memory>

#include "client_core.hpp"
#include "core/token.hpp"
#include "integration/common.hpp"
#include "integration/sqlite_poke.hpp"
#include "sqlite/host.hpp"
#include "support/temp_dir.hpp"

namespace dlock::test {
namespace {

using detail::LockMode;

// A Client and the core under it (shared and counted holds are internal
// until their public classes land).
struct Conn {
  std::shared_ptr<detail::ClientCore> core;
  Client client;
};

Conn open(const std::string& path, LogSink& log) {
  auto core = detail::ClientCore::connect("sqlite://" + path, quiet(log));
  if (!core.ok()) throw Error(core.status());
  return {*core, detail::ClientFactory::make(*core)};
}

Result<Lease> take(Conn& c, const std::string& name, milliseconds wait, LockMode mode, unsigned permits = 0,
                   LockOptions options = {}) {
  if (mode == LockMode::exclusive) options.fair = true;
  const bool fresh = options.owner.empty();  // as Client::acquire does
  if (fresh) options.owner = detail::random_token();
  return detail::blocking_acquire(*c.core, name, wait, options, fresh, detail::Shape{mode, permits});
}

Result<Lease> read_lock(Conn& c, const std::string& name, milliseconds wait, LockOptions o = {}) {
  return take(c, name, wait, LockMode::shared, 0, std::move(o));
}
Result<Lease> permit(Conn& c, const std::string& name, milliseconds wait, unsigned permits, LockOptions o = {}) {
  return take(c, name, wait, LockMode::shared, permits, std::move(o));
}
Result<Lease> fair(Conn& c, const std::string& name, milliseconds wait, LockOptions o = {}) {
  return take(c, name, wait, LockMode::exclusive, 0, std::move(o));
}

unsigned waiters(Client& c, const std::string& name) {
  auto info = c.inspect(name);
  return info.ok() ? info->waiters.value_or(0) : 0;
}

// The file's rows, for failure messages.
std::string dump(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return "(cannot open)";
  std::string out;
  for (const char* sql : {"SELECT name, owner, grant_id, depth, fence, expires_ms, releases FROM dlock_locks",
                          "SELECT name, owner, grant_id, kind, mode, ticket, expires_ms FROM dlock_line"}) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) continue;
    while (sqlite3_step(st) == SQLITE_ROW) {
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        const auto* t = sqlite3_column_text(st, i);
        out += (t ? reinterpret_cast<const char*>(t) : "NULL");
        out += '|';
      }
      out += '\n';
    }
    sqlite3_finalize(st);
    out += "--\n";
  }
  sqlite3_close(db);
  return out + "now " + std::to_string(sqlite::boot_ms());
}

// (b) A waiter whose wait ends as the holder lets go: whichever way the race
// goes, nothing stays held and nobody stays in line.
TEST(SqliteLines, AWaiterTimingOutAsAReleaseArrivesLeavesNothingHeld) {
  TempDir dir;
  const std::string path = dir.file("locks.db");
  LogSink log;
  Conn a = open(path, log), b = open(path, log), c = open(path, log);
  int granted = 0, timed_out = 0;
  for (int round = 0; round < 16; ++round) {
    auto held = fair(a, "t", 1s);
    ASSERT_TRUE(held.ok()) << held.status().to_string();
    const auto wait = 150ms;
    auto waiter = std::async(std::launch::async, [&] { return fair(b, "t", wait); });
    // Release around the waiter's deadline: a little before, at, or after.
    std::this_thread::sleep_for(wait - 6ms + milliseconds(round % 4 * 3));
    ASSERT_TRUE(held->release().ok());
    auto got = waiter.get();
    if (got.ok()) {
      ++granted;
      EXPECT_TRUE(got->release().ok());
    } else {
      ++timed_out;
      EXPECT_EQ(got.status().code(), Errc::timeout) << got.status().to_string();
    }
    ASSERT_TRUE(eventually(
        [&] {
          auto info = c.client.inspect("t");
          return info.ok() && !info->held && info->waiters.value_or(0) == 0;
        },
        3s))
        << "round " << round << (got.ok() ? " (granted)\n" : " (timed out)\n") << dump(path) << "\n"
        << [&] {
             std::lock_guard lk(log.mu);
             std::string all;
             for (const auto& l : log.lines) all += l + "\n";
             return all;
           }();
    auto fresh = c.client.try_acquire("t");
    ASSERT_TRUE(fresh.ok()) << "round " << round << ": " << fresh.status().to_string();
    ASSERT_TRUE(fresh->release().ok());
  }
  std::cout << "granted " << granted << ", timed out " << timed_out << "\n";
  EXPECT_EQ(query_number(path, "SELECT count(*) FROM dlock_line WHERE kind != 2"), 0);
}

// (c) A queued waiter in another process is killed: the line moves past it
// (at once, since its process is seen dead; at the latest after its lease).
TEST(SqliteLines, AWaiterThatDiesDoesNotStallTheLine) {
  TempDir dir;
  const std::string path = dir.file("locks.db"), started = dir.file("started"), held_file = dir.file("held");
  constexpr auto kChildLease = 2000ms;
  // Forked before this process has clients (their threads): the child
  // joins the line once the holder holds.
  pid_t child = fork_child([&] {
    for (int i = 0; i < 2000 && read_number(held_file) == 0; ++i) std::this_thread::sleep_for(5ms);
    LogSink child_log;
    Conn c = open(path, child_log);
    std::ofstream(started) << 1;
    LockOptions o = fast_watchdog(kChildLease, kChildLease / 3);
    auto l = fair(c, "d", 120s, o);
    return l.ok() ? 3 : 4;
  });
  LogSink log;
  Conn holder = open(path, log), next = open(path, log);
  auto held = fair(holder, "d", 1s);
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  std::ofstream(held_file) << 1;
  ASSERT_TRUE(eventually([&] { return waiters(holder.client, "d") == 1; }, 10s)) << "the child joined the line";
  auto second = std::async(std::launch::async, [&] { return fair(next, "d", 30s); });
  ASSERT_TRUE(eventually([&] { return waiters(holder.client, "d") == 2; }, 5s));
  kill(child, SIGKILL);
  EXPECT_EQ(wait_exit(child, 10s), 128 + SIGKILL);
  const auto released = Clock::now();
  ASSERT_TRUE(held->release().ok());
  auto got = second.get();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  const auto took = ms_since(released);
  measure("sqlite_line_past_dead_waiter", took);
  EXPECT_LT(took, kChildLease.count()) << "the dead waiter stalled the line";
  EXPECT_EQ(waiters(holder.client, "d"), 0u);
}

// (d) Readers overlap; a writer (another process) waits for them; a reader
// arriving while the writer waits queues behind it.
TEST(SqliteLines, ReadersOverlapAndAWaitingWriterIsNotPassed) {
  TempDir dir;
  const std::string path = dir.file("locks.db"), wrote = dir.file("wrote"), go = dir.file("go"),
                    readers_in = dir.file("readers-in");
  // Forked before this process has clients (their threads): the writer
  // queues once both readers hold.
  pid_t writer = fork_child([&] {
    for (int i = 0; i < 2000 && read_number(readers_in) == 0; ++i) std::this_thread::sleep_for(5ms);
    LogSink child_log;
    Conn w = open(path, child_log);
    auto l = fair(w, "rw", 60s);
    if (!l.ok()) return 2;
    std::ofstream(wrote) << l->fence();
    for (int i = 0; i < 2000 && read_number(go) == 0; ++i) std::this_thread::sleep_for(5ms);
    return l->release().ok() ? 0 : 3;
  });
  LogSink log;
  Conn r1 = open(path, log), r2 = open(path, log), r3 = open(path, log);
  auto a = read_lock(r1, "rw", 1s);
  auto b = read_lock(r2, "rw", 1s);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  auto info = r1.client.inspect("rw");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->held);
  EXPECT_TRUE(info->shared);
  EXPECT_EQ(info->holders, 2u);
  std::ofstream(readers_in) << 1;
  ASSERT_TRUE(eventually([&] { return waiters(r1.client, "rw") == 1; }, 10s)) << "the writer waits";
  EXPECT_EQ(read_lock(r3, "rw", 0ms).status().code(), Errc::busy) << "a reader may not pass a waiting writer";
  auto late_reader = std::async(std::launch::async, [&] { return read_lock(r3, "rw", 30s); });
  ASSERT_TRUE(eventually([&] { return waiters(r1.client, "rw") == 2; }, 5s));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(read_number(wrote), 0) << "the writer waits for the readers";
  ASSERT_TRUE(a->release().ok());
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(read_number(wrote), 0) << "one reader still holds it";
  ASSERT_TRUE(b->release().ok());
  ASSERT_TRUE(eventually([&] { return read_number(wrote) > 0; }, 5s)) << "the writer got it after the readers";
  EXPECT_EQ(late_reader.wait_for(100ms), std::future_status::timeout) << "the late reader waits for the writer";
  std::ofstream(go) << 1;
  auto c = late_reader.get();
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_GT(c->fence(), static_cast<std::uint64_t>(read_number(wrote)));
  EXPECT_EQ(wait_exit(writer, 10s), 0);
}

// (e) Three permits never make a fourth holder; a caller that disagrees on
// the count is refused.
TEST(SqliteLines, ThreePermitsNeverGiveAFourthHolder) {
  TempDir dir;
  const std::string path = dir.file("locks.db");
  LogSink log;
  constexpr unsigned kPermits = 3;
  {
    std::vector<Conn> conns;
    std::vector<Lease> held;
    for (unsigned i = 0; i < kPermits + 1; ++i) conns.push_back(open(path, log));
    for (unsigned i = 0; i < kPermits; ++i) {
      auto l = permit(conns[i], "sem", 1s, kPermits);
      ASSERT_TRUE(l.ok()) << l.status().to_string();
      held.push_back(std::move(*l));
    }
    EXPECT_EQ(permit(conns[kPermits], "sem", 0ms, kPermits).status().code(), Errc::busy);
    EXPECT_EQ(permit(conns[kPermits], "sem", 200ms, kPermits).status().code(), Errc::timeout);
    EXPECT_EQ(permit(conns[kPermits], "sem", 0ms, 2).status().code(), Errc::invalid_argument);
    EXPECT_EQ(read_lock(conns[kPermits], "sem", 0ms).status().code(), Errc::invalid_argument);
    EXPECT_EQ(conns[kPermits].client.inspect("sem")->holders, kPermits);
    for (auto& l : held) ASSERT_TRUE(l.release().ok());
  }
  // Six processes' worth of contention, through separate Clients.
  constexpr int kWorkers = 6, kRounds = 15;
  std::atomic<int> in_use{0}, most{0}, failures{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      LogSink wlog;
      Conn c = open(path, wlog);
      for (int i = 0; i < kRounds; ++i) {
        auto l = permit(c, "sem", 30s, kPermits);
        if (!l.ok()) {
          ++failures;
          continue;
        }
        const int now = ++in_use;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(3ms);
        --in_use;
        if (!l->release().ok()) ++failures;
      }
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(most.load(), static_cast<int>(kPermits));
  EXPECT_GE(most.load(), 2) << "permits were shared at all";
}

// (h) A file of schema 1 (before lines) is upgraded in place: its held lock
// stays held, its fence counter goes on, and lines work in it.
TEST(SqliteLines, AFileOfThePreviousSchemaIsUpgradedInPlace) {
  TempDir dir;
  const std::string path = dir.file("locks.db");
  const long long until = sqlite::boot_ms() + 1500;
  poke(path, R"sql(
PRAGMA journal_mode = WAL;
CREATE TABLE dlock_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE dlock_locks (
  name TEXT PRIMARY KEY,
  owner TEXT,
  grant_id INTEGER NOT NULL DEFAULT 0,
  depth INTEGER NOT NULL DEFAULT 0,
  fence INTEGER NOT NULL DEFAULT 0,
  expires_ms INTEGER NOT NULL DEFAULT 0,
  boot_id TEXT NOT NULL DEFAULT '',
  pid INTEGER NOT NULL DEFAULT 0,
  pid_start INTEGER NOT NULL DEFAULT 0,
  pid_ns TEXT NOT NULL DEFAULT '',
  releases INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO dlock_meta VALUES ('schema', 1), ('fence', 41);
)sql");
  // Held by a process that could not name itself: only its lease frees it.
  poke(path,
       "INSERT INTO dlock_locks (name, owner, grant_id, depth, fence, expires_ms, boot_id) VALUES ('old', "
       "'someone', 1, 1, 41, " +
           std::to_string(until) + ", '" + sqlite::boot_id() + "')");
  LogSink log;
  Conn a = open(path, log), b = open(path, log);
  EXPECT_EQ(query_number(path, "SELECT value FROM dlock_meta WHERE key = 'schema'"), 4);
  EXPECT_EQ(query_number(path, "SELECT count(*) FROM pragma_table_info('dlock_locks') WHERE name = 'info'"), 1);
  EXPECT_EQ(query_number(path, "SELECT count(*) FROM pragma_table_info('dlock_locks') WHERE name = 'woken'"), 1);
  EXPECT_EQ(query_number(path, "SELECT count(*) FROM sqlite_master WHERE name = 'dlock_waiters'"), 1);
  EXPECT_EQ(query_number(path, "SELECT count(*) FROM pragma_table_info('dlock_locks') WHERE name = 'granted_ms'"), 1);
  EXPECT_EQ(query_number(path, "SELECT count(*) FROM pragma_table_info('dlock_line') WHERE name = 'granted_ms'"), 1);
  auto info = a.client.inspect("old");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->fence, 41u);
  EXPECT_EQ(a.client.try_acquire("old").status().code(), Errc::busy);
  EXPECT_EQ(read_lock(a, "old", 0ms).status().code(), Errc::busy);
  // A fair waiter gets it when the old lease runs out, with a later fence.
  auto got = fair(b, "old", 10s);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_GT(got->fence(), 41u);
  EXPECT_GE(sqlite::boot_ms(), until);
  ASSERT_TRUE(got->release().ok());
  auto r1 = read_lock(a, "new", 1s), r2 = read_lock(b, "new", 1s);
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(a.client.inspect("new")->holders, 2u);
}

}  // namespace
}  // namespace dlock::test

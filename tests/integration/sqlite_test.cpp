// The SQLite backend on real files shared by several processes: exclusion
// and fences across processes, a dead holder freeing its lock at once, rows
// from another boot, and files that are not (this) lock table.
#include <signal.h>
#include <sqlite3.h>

#include <fstream>
#include <future>

#include "integration/common.hpp"
#include "integration/sqlite_poke.hpp"
#include "support/temp_dir.hpp"

namespace dlock::test {
namespace {

std::string url_of(const TempDir& dir) { return "sqlite://" + dir.file("locks.db"); }

TEST(Sqlite, ProcessesTakeTurnsAndLoseNoUpdate) {
  TempDir dir;
  const std::string url = url_of(dir), counter = dir.file("counter"), fences = dir.file("fences");
  constexpr int kProcs = 4, kIncrements = 100;
  std::vector<pid_t> kids;  // forked before this process makes a client
  for (int p = 0; p < kProcs; ++p) {
    kids.push_back(fork_child([&] {
      LogSink log;
      auto client = Client::connect(url, quiet(log));
      Mutex m(client, "counter");
      for (int i = 0; i < kIncrements; ++i) {
        std::unique_lock lk(m);
        const long long v = read_number(counter);
        std::this_thread::yield();  // widen the race window a little
        std::ofstream(counter, std::ios::trunc) << v + 1;
        std::ofstream(fences, std::ios::app) << m.fence() << '\n';
      }
      return 0;
    }));
  }
  for (pid_t k : kids) EXPECT_EQ(wait_exit(k, 120s), 0);
  EXPECT_EQ(read_number(counter), kProcs * kIncrements);
  std::ifstream in(fences);
  long long prev = 0, f = 0, count = 0;
  while (in >> f) {
    EXPECT_GT(f, prev) << "fences strictly increase in grant order";
    prev = f;
    ++count;
  }
  EXPECT_EQ(count, kProcs * kIncrements);
}

// The holder keeps a 30 s lease renewed; only its death can free the lock
// within the waiter's 20 s.
TEST(Sqlite, AHolderThatDiesFreesTheLockAtOnce) {
  TempDir dir;
  const std::string url = url_of(dir), marker = dir.file("held");
  pid_t holder = fork_child([&] {
    LogSink log;
    auto client = Client::connect(url, quiet(log));
    auto lease = client.acquire("job", 5s);
    if (!lease.ok()) return 1;
    std::ofstream(marker) << lease->fence();
    std::this_thread::sleep_for(120s);
    return 0;
  });
  ASSERT_TRUE(eventually([&] { return read_number(marker) > 0; }, 10s));
  LogSink log;
  auto client = Client::connect(url, quiet(log));
  EXPECT_EQ(client.try_acquire("job").status().code(), Errc::busy);
  auto waiter = std::async(std::launch::async, [&] { return client.acquire("job", 20s); });
  std::this_thread::sleep_for(200ms);  // the waiter is waiting
  const auto killed = Clock::now();
  kill(holder, SIGKILL);
  EXPECT_EQ(wait_exit(holder, 10s), 128 + SIGKILL);
  auto got = waiter.get();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_GT(got->fence(), static_cast<std::uint64_t>(read_number(marker)));
  std::cout << "taken over " << ms_since(killed) << " ms after the holder was killed\n";
}

TEST(Sqlite, ALockOfADeadProcessIsFreeForTheNextAcquire) {
  TempDir dir;
  const std::string url = url_of(dir);
  pid_t holder = fork_child([&] {
    LogSink log;
    auto client = Client::connect(url, quiet(log));
    auto lease = client.acquire("job", 5s);
    if (!lease.ok()) return 1;
    _exit(0);  // no release, no clean shutdown
  });
  EXPECT_EQ(wait_exit(holder, 10s), 0);
  LogSink log;
  auto client = Client::connect(url, quiet(log));
  EXPECT_FALSE(client.inspect("job")->held);
  EXPECT_TRUE(client.try_acquire("job").ok());
}

TEST(Sqlite, ARowFromAnotherBootHoldsNothing) {
  TempDir dir;
  const std::string url = url_of(dir);
  LogSink log;
  auto client = Client::connect(url, quiet(log));
  ASSERT_TRUE(client.inspect("job").ok());  // the table exists now
  poke(dir.file("locks.db"),
       "INSERT INTO dlock_locks (name, owner, grant_id, depth, fence, expires_ms, boot_id, pid) "
       "VALUES ('job', 'someone/1', 1, 1, 1, 9000000000000000000, 'another-boot', 1)");
  EXPECT_FALSE(client.inspect("job")->held);
  auto lease = client.try_acquire("job");
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
}

TEST(Sqlite, AnotherSchemaVersionIsAClearError) {
  TempDir dir;
  LogSink log;
  { auto client = Client::connect(url_of(dir), quiet(log)); }
  poke(dir.file("locks.db"), "UPDATE dlock_meta SET value = 99 WHERE key = 'schema'");
  auto client = Client::try_connect(url_of(dir), quiet(log));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Errc::wrong_type);
  EXPECT_NE(client.status().message().find("schema version 99"), std::string::npos) << client.status().message();
}

TEST(Sqlite, AFileThatIsNotADatabaseIsRefusedAndKept) {
  TempDir dir;
  const std::string text(4096, 'x');
  std::ofstream(dir.file("locks.db")) << text;
  LogSink log;
  auto client = Client::try_connect(url_of(dir), quiet(log));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Errc::wrong_type) << client.status().to_string();
  std::ifstream in(dir.file("locks.db"));
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, text) << "nothing written over it";
}

TEST(Sqlite, AMissingDirectoryIsAClearError) {
  LogSink log;
  auto client = Client::try_connect("sqlite:///nonexistent-dlock-dir/locks.db", quiet(log));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Errc::invalid_argument);
  EXPECT_NE(client.status().message().find("/nonexistent-dlock-dir"), std::string::npos);
}

TEST(Sqlite, AClosedClientLeavesEveryLockFree) {
  TempDir dir;
  LogSink log;
  {
    auto client = Client::connect(url_of(dir), quiet(log));
    auto a = client.acquire("a", 0ms);
    auto b = client.acquire("b", 0ms);
    ASSERT_TRUE(a.ok() && b.ok());
    auto waiter = client.acquire("a", 50ms);  // times out while held
    EXPECT_EQ(waiter.status().code(), Errc::timeout);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir.file("locks.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM dlock_locks WHERE owner IS NOT NULL", -1, &st, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

}  // namespace
}  // namespace dlock::test

// The PostgreSQL backend against a real cluster per test: exclusion across
// processes, server restarts and killed connections, and the errors a
// misconfigured database gives.
#include <fstream>
#include <future>
#include <mutex>

#include "integration/common.hpp"
#include "support/postgres_server.hpp"

namespace dlock::test {
namespace {

TEST(Postgres, ProcessesTakeTurnsAndLoseNoUpdate) {
  PostgresServer pg;
  const std::string url = pg.url(), counter = pg.dir() + "/counter", fences = pg.dir() + "/fences";
  constexpr int kProcs = 4, kIncrements = 50;
  std::vector<pid_t> kids;  // forked before this process makes a client
  for (int p = 0; p < kProcs; ++p) {
    kids.push_back(fork_child([&] {
      LogSink log;
      auto client = Client::connect(url, quiet(log));
      Mutex m(client, "counter");
      for (int i = 0; i < kIncrements; ++i) {
        std::unique_lock lk(m);
        const long long v = read_number(counter);
        std::this_thread::yield();
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

// The lease lives in the table: a restart shorter than the lease loses
// nothing, and the client reconnects by itself.
TEST(Postgres, AHoldOutlivesAFastRestart) {
  PostgresServer pg;
  LogSink log;
  auto client = Client::connect(pg.url(), quiet(log));
  auto lease = client.acquire("job", 0ms);
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  pg.stop();
  pg.start();
  auto other = Client::connect(pg.url(), quiet(log));
  EXPECT_EQ(other.try_acquire("job").status().code(), Errc::busy);
  auto info = other.inspect("job");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->fence, lease->fence());
  EXPECT_FALSE(lease->lost());
  EXPECT_TRUE(lease->release().ok());
  EXPECT_FALSE(other.inspect("job")->held);
}

// The test cluster runs with synchronous_commit = off, as some production
// servers do: a commit returns before its WAL is written. A grant must be
// durable before it is reported, or a crash hands the lock out again with
// the same fence while its first holder still believes in it.
TEST(Postgres, AGrantSurvivesACrashOfAServerWithAsynchronousCommit) {
  PostgresServer pg;
  pg.set("wal_writer_delay", "10000ms");  // no background flush during the test
  pg.stop();
  pg.start();
  LogSink log;
  auto client = Client::connect(pg.url(), quiet(log));
  ASSERT_EQ(pg.psql("SHOW synchronous_commit"), "off\n");
  auto lease = client.acquire("job", 0ms);
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  const std::uint64_t fence = lease->fence();
  pg.crash();
  pg.start();
  auto other = Client::connect(pg.url(), quiet(log));
  EXPECT_EQ(other.try_acquire("job").status().code(), Errc::busy) << "the grant was forgotten in the crash";
  EXPECT_FALSE(lease->lost());
  auto info = other.inspect("job");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->fence, fence);
  EXPECT_GE(info->last_fence, fence) << "fences never go back";
}

// An acquire the client gave up on (its reply was lost) may still reach the
// server after its undo, e.g. after waiting for a row lock. The undo leaves
// a tombstone for that grant, so the stray copy cannot take the lock and
// block the name for a whole lease; other grants are not affected.
TEST(Postgres, AStrayAcquireArrivingAfterItsUndoIsRefused) {
  PostgresServer pg;
  LogSink log;
  { auto client = Client::connect(pg.url(), quiet(log)); }  // makes the table
  // The undo: the last level of grant 42, with a 5 s tombstone; nothing held yet.
  EXPECT_EQ(pg.psql("SELECT kind FROM dlock_locks_release('job', 'me', 42, 1, false, 5000)"), "1\n");
  // The stray copy of grant 42's acquire: refused as lost (kind 2), nothing written.
  EXPECT_EQ(pg.psql("SELECT kind FROM dlock_locks_acquire('job', 'me', 42, 0, 30000, NULL)"), "2\n");
  EXPECT_EQ(pg.psql("SELECT count(*) FROM dlock_locks"), "0\n");
  // Another grant of the same owner is not a stray copy.
  EXPECT_EQ(pg.psql("SELECT kind FROM dlock_locks_acquire('job', 'me', 43, 0, 30000, NULL)"), "1\n");
}

TEST(Postgres, AKilledConnectionIsReplacedAndTheWaiterStillWakes) {
  PostgresServer pg;
  LogSink log;
  auto holder = Client::connect(pg.url(), quiet(log));
  auto waiter_client = Client::connect(pg.url(), quiet(log));
  auto lease = holder.acquire("job", 0ms);
  ASSERT_TRUE(lease.ok());
  auto waiter = std::async(std::launch::async, [&] { return waiter_client.acquire("job", 20s); });
  std::this_thread::sleep_for(200ms);
  // Every client connection, the waiter's LISTEN included.
  pg.psql(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
      "AND backend_type = 'client backend'");
  std::this_thread::sleep_for(300ms);  // the LISTEN is back (backoff 100 ms)
  const auto released = Clock::now();
  EXPECT_TRUE(lease->release().ok());
  auto got = waiter.get();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  std::cout << "woken " << ms_since(released) << " ms after the release (the holder's lease was 30 s)\n";
}

TEST(Postgres, AnUnreachableServerIsUnavailable) {
  LogSink log;
  auto c =
      Client::try_connect("postgres://postgres@127.0.0.1:" + std::to_string(free_port()) + "/postgres", quiet(log));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::unavailable) << c.status().to_string();
}

// sslmode as PostgreSQL documents it: require on a server without TLS is
// refused; verify-full trusts only the CA given and encrypts every
// connection the client makes.
TEST(Postgres, TlsIsVerifiedAsTheUrlAsks) {
  PostgresServer pg;
  LogSink log;
  auto plain = Client::try_connect(pg.url("sslmode=require"), quiet(log));
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), Errc::tls_failed) << plain.status().to_string();

  pg.enable_tls();
  const std::string other_ca = make_ca(pg.dir(), "other-ca");
  auto wrong = Client::try_connect(pg.url("sslmode=verify-full&sslrootcert=" + other_ca), quiet(log));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), Errc::tls_failed) << wrong.status().to_string();

  auto client = Client::try_connect(pg.url("sslmode=verify-full&sslrootcert=" + pg.ca_file()), quiet(log));
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  auto lease = client->try_acquire("job");
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  const std::string others =
      "FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.backend_type = "
      "'client backend' AND a.pid <> pg_backend_pid()";
  EXPECT_EQ(pg.psql("SELECT count(*) " + others + " AND NOT s.ssl"), "0\n");
  EXPECT_NE(pg.psql("SELECT count(*) " + others + " AND s.ssl"), "0\n");
  EXPECT_TRUE(lease->release().ok());
}

// A database whose statement_timeout cancels a call (here: the table is
// locked by someone else) gives a retryable error, and nothing is held.
TEST(Postgres, AStatementTimeoutIsRetryableAndHoldsNothing) {
  PostgresServer pg;
  LogSink log;
  auto maker = Client::connect(pg.url(), quiet(log));  // makes the table
  pg.psql("ALTER DATABASE postgres SET statement_timeout = '300ms'");
  auto client = Client::connect(pg.url(), quiet(log));  // its sessions get it
  auto locker = std::async(std::launch::async, [&] {
    return pg.psql(
        "SET statement_timeout = 0; BEGIN; LOCK TABLE dlock_locks IN ACCESS EXCLUSIVE MODE; "
        "SELECT pg_sleep(2); COMMIT");
  });
  ASSERT_TRUE(eventually(
      [&] {
        return pg.psql(
                   "SELECT count(*) FROM pg_locks WHERE relation = 'dlock_locks'::regclass AND granted AND "
                   "mode = 'AccessExclusiveLock'") == "1\n";
      },
      5s));
  auto r = client.try_acquire("job");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::unavailable) << r.status().to_string();
  EXPECT_EQ(r.status().backend_code(), "57014") << r.status().to_string();
  locker.get();
  EXPECT_FALSE(maker.inspect("job").value().held);
  EXPECT_TRUE(client.try_acquire("job").ok());
}

TEST(Postgres, MisconfiguredDatabasesGiveClearErrors) {
  PostgresServer pg;
  LogSink log;
  auto no_role =
      Client::try_connect("postgres://nobody@127.0.0.1:" + std::to_string(pg.port()) + "/postgres", quiet(log));
  ASSERT_FALSE(no_role.ok());
  EXPECT_NE(no_role.status().message().find("nobody"), std::string::npos) << no_role.status().to_string();
  // A role that may not create the table is told how to get one.
  pg.psql("CREATE ROLE app LOGIN; REVOKE CREATE ON SCHEMA public FROM PUBLIC");
  auto app = Client::try_connect("postgres://app@127.0.0.1:" + std::to_string(pg.port()) + "/postgres", quiet(log));
  ASSERT_FALSE(app.ok());
  EXPECT_EQ(app.status().code(), Errc::permission_denied) << app.status().to_string();
  EXPECT_NE(app.status().message().find("dlock migrate"), std::string::npos) << app.status().message();
  EXPECT_EQ(app.status().backend_code(), "42501");
  // Once made by a role that can, and granted, the application role works.
  { auto admin = Client::connect(pg.url(), quiet(log)); }
  pg.psql(
      "GRANT SELECT, INSERT, UPDATE, DELETE ON dlock_locks, dlock_locks_meta, dlock_locks_tombstones, "
      "dlock_locks_line, dlock_locks_line_tombs TO app; "
      "GRANT USAGE, SELECT ON dlock_locks_fence, dlock_locks_ticket TO app");
  auto granted = Client::connect("postgres://app@127.0.0.1:" + std::to_string(pg.port()) + "/postgres", quiet(log));
  EXPECT_TRUE(granted.try_acquire("job").ok());
}

// Two roles with different search_paths (alice has a schema of her own
// name, first in the default "$user", public) must still share one table:
// found through search_path, each made its own and both held the lock with
// fence 1.
TEST(Postgres, RolesWithDifferentSearchPathsShareOneLockTable) {
  PostgresServer pg;
  pg.psql(
      "CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN; CREATE SCHEMA alice AUTHORIZATION alice; "
      "GRANT CREATE ON SCHEMA public TO alice, bob");
  const std::string at = "@127.0.0.1:" + std::to_string(pg.port()) + "/postgres";
  LogSink log;
  auto alice = Client::connect("postgres://alice" + at, quiet(log));
  auto held = alice.acquire("job", 0ms);
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  pg.psql("GRANT ALL ON ALL TABLES IN SCHEMA public TO bob; GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO bob");
  auto bob = Client::connect("postgres://bob" + at, quiet(log));
  EXPECT_EQ(bob.try_acquire("job").status().code(), Errc::busy) << "two tables, one lock held twice";
  EXPECT_EQ(pg.psql("SELECT count(*) FROM pg_tables WHERE tablename = 'dlock_locks'"), "1\n");
  // Another schema is chosen in the URL, and must exist.
  auto missing = Client::try_connect("postgres://bob" + at + "?schema=nowhere", quiet(log));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Errc::invalid_argument) << missing.status().to_string();
  pg.psql("CREATE SCHEMA ops AUTHORIZATION bob");
  auto ops = Client::connect("postgres://bob" + at + "?schema=ops", quiet(log));
  EXPECT_TRUE(ops.try_acquire("job").ok()) << "ops.dlock_locks is another set of locks";
}

TEST(Postgres, AReadOnlyDatabaseIsUnavailableAndLosesNothing) {
  PostgresServer pg;
  LogSink log;
  auto client = Client::connect(pg.url(), quiet(log));
  pg.psql("ALTER DATABASE postgres SET default_transaction_read_only = on");
  pg.psql(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
      "AND backend_type = 'client backend'");
  // The first call may meet the terminated connection; none is granted.
  Status last;
  EXPECT_TRUE(eventually(
      [&] {
        auto r = client.try_acquire("job");
        EXPECT_FALSE(r.ok());
        last = r.status();
        return last.backend_code() == "25006";
      },
      5s))
      << last.to_string();
  EXPECT_EQ(last.code(), Errc::unavailable) << last.to_string();
  pg.psql("ALTER DATABASE postgres SET default_transaction_read_only = off");
  pg.psql(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
      "AND backend_type = 'client backend'");
  EXPECT_TRUE(client.try_acquire("job").ok());
}

TEST(Postgres, ADroppedTableIsAClearError) {
  PostgresServer pg;
  LogSink log;
  auto client = Client::connect(pg.url(), quiet(log));
  pg.psql("DROP FUNCTION dlock_locks_acquire");
  auto r = client.try_acquire("job");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::wrong_type) << r.status().to_string();
}

// A table of schema version 1 is migrated in place (tombstones, durable
// grants), its locks kept; the server's notices on the way ("already
// exists, skipping") go to the client's logger, never to stderr.
TEST(Postgres, AnOlderSchemaIsMigratedAndItsNoticesStayOffStderr) {
  PostgresServer pg;
  LogSink log;
  auto first = Client::connect(pg.url(), quiet(log));
  auto held = first.acquire("job", 0ms);
  ASSERT_TRUE(held.ok());
  pg.psql("UPDATE dlock_locks_meta SET value = 1; DROP TABLE dlock_locks_tombstones");
  std::vector<std::string> lines;
  std::mutex mu;
  ClientOptions o;
  o.logger = [&](LogLevel, std::string_view m) {
    std::lock_guard lk(mu);
    lines.emplace_back(m);
  };
  ::testing::internal::CaptureStderr();
  auto second = Client::try_connect(pg.url(), o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_EQ(err, "");
  EXPECT_EQ(pg.psql("SELECT value FROM dlock_locks_meta"), "7\n");
  EXPECT_EQ(second->try_acquire("job").status().code(), Errc::busy) << "the held lock survived the migration";
  std::lock_guard lk(mu);
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(),
                          [](const std::string& l) { return l.find("already exists") != std::string::npos; }));
}

TEST(Postgres, AnotherSchemaVersionIsAClearError) {
  PostgresServer pg;
  LogSink log;
  { auto client = Client::connect(pg.url(), quiet(log)); }
  pg.psql("UPDATE dlock_locks_meta SET value = 99");
  auto c = Client::try_connect(pg.url(), quiet(log));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Errc::wrong_type);
  EXPECT_NE(c.status().message().find("schema version 99"), std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace dlock::test

// What `dlock` prints: no secrets, hints true for the backend in use, names
// cut to a readable size; and the option checks behind some of them.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "integration/common.hpp"
#include "support/postgres_server.hpp"
#include "support/temp_dir.hpp"

namespace dlock::test {
namespace {

const std::string kCli = DLOCK_CLI_PATH;

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

class CliMessages : public ::testing::Test {
 protected:
  RedisServer server;
  Env env() const { return {{"DLOCK_URL", server.url()}}; }
  RunResult dlock(std::vector<std::string> args, const Env& e) {
    args.insert(args.begin(), kCli);
    return run(args, 30s, e);
  }
  RunResult dlock(std::vector<std::string> args) { return dlock(std::move(args), env()); }
};

TEST_F(CliMessages, ArgumentErrorsDoNotPrintPasswords) {
  const std::vector<std::vector<std::string>> cases = {
      {"--url", "redis://:HUNTER2@127.0.0.1:1", "run", "x", "--", "true"},
      {"migrate", "postgres://user:HUNTER2@127.0.0.1:1/db", "extra"},
      {"status", "--url", "redis://u:HUNTER2@127.0.0.1:1", "a", "b"},
      {"status", "redis://u:HUNTER2@127.0.0.1:1", "x", "--bogus"},
      {"run", "--url", "http://u:HUNTER2@x", "x", "--", "true"},
      {"run", "--url=redis://u:HUNTER2@127.0.0.1:1", "--ttl", "soon", "x", "--", "true"},
  };
  for (const auto& args : cases) {
    auto r = dlock(args);
    EXPECT_NE(r.exit_code, 0) << join_args(args);
    EXPECT_FALSE(has(r.err + r.out, "HUNTER2")) << join_args(args) << ":\n" << r.err;
  }
  // A blank in the password: the argument is quoted whole.
  auto blank = dlock({"status", "x", "redis://u:HUNTER 2@127.0.0.1:1"});
  EXPECT_EQ(blank.exit_code, 64);
  EXPECT_FALSE(has(blank.err, "HUNTER") || has(blank.err, "2@")) << blank.err;
}

// The form the PostgreSQL permission hint suggests: `dlock migrate URL`.
TEST_F(CliMessages, MigrateTakesTheUrlAsAnArgument) {
  auto r = dlock({"migrate", "sqlite://" + server.dir() + "/m.db"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "ready")) << r.out;
}

TEST_F(CliMessages, AnUnknownOptionIsNamed) {
  auto r = dlock({"run", "--wiat", "0", "ran", "--", "echo"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_TRUE(has(r.err, "--wiat")) << r.err;
}

TEST_F(CliMessages, LongNamesAreCutInMessages) {
  const std::string name(100'000, 'n');
  auto r = dlock({"run", "--wait", "0", name, "--", "true"});
  EXPECT_EQ(r.exit_code, 64) << r.err.substr(0, 300);
  EXPECT_LT(r.err.size(), 1000u) << r.err.substr(0, 300);
  auto s = dlock({"status", name});
  EXPECT_EQ(s.exit_code, 64);
  EXPECT_LT(s.err.size(), 1000u) << s.err.substr(0, 300);
}

// A lease the watchdog cannot keep (renewed every ttl/3 with a drift margin
// of ttl/100 + 2 ms) is refused, by the tool and by the library.
TEST_F(CliMessages, LeasesTheWatchdogCannotKeepAreRefused) {
  for (const char* ttl : {"10ms", "50ms"}) {
    auto r = dlock({"run", "--ttl", ttl, "short", "--", "true"});
    EXPECT_EQ(r.exit_code, 64) << ttl << ": " << r.err;
    EXPECT_TRUE(has(r.err, "--ttl")) << r.err;
  }
  EXPECT_EQ(dlock({"run", "--ttl", "300ms", "short", "--", "true"}).exit_code, 0);
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  LockOptions o;
  o.watchdog_lease = 50ms;
  o.renew_interval = 16ms;
  auto refused = client.try_acquire("short", o);
  EXPECT_EQ(refused.code(), Errc::invalid_argument);
  EXPECT_TRUE(has(refused.status().message(), "watchdog_lease")) << refused.status().to_string();
}

TEST_F(CliMessages, ATtlWithAZooKeeperUrlIsRefused) {
  auto r = dlock({"run", "--url", "zk://127.0.0.1:1", "--ttl", "5s", "x", "--", "true"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_TRUE(has(r.err, "session_timeout")) << r.err;
}

// `status` reads: on a fresh HOME it creates nothing and says "free".
// A peer's Redis key with no TTL is no session's: status says what it is.
TEST_F(CliMessages, APeersKeyWithoutExpiryIsNotCalledASession) {
  SyncRedis(server.port()).cmd({"SET", "forever", "peer-token"});
  auto text = dlock({"status", "--url", server.url() + "?layout=plain", "forever"});
  EXPECT_NE(text.out.find("no expiry"), std::string::npos) << text.out << text.err;
  EXPECT_EQ(text.out.find("session"), std::string::npos) << text.out;
}

TEST_F(CliMessages, StatusOnAFreshHomeWritesNothing) {
  const std::string home = server.dir() + "/fresh-home";
  const Env fresh = {{"DLOCK_URL", ""}, {"HOME", home}, {"XDG_STATE_HOME", ""}};
  auto r = dlock({"status", "--json", "x"}, fresh);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["held"], false);
  struct stat st {};
  EXPECT_NE(::stat(home.c_str(), &st), 0) << "status created " << home;
  auto text = dlock({"status", "x"}, fresh);
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(has(text.out, "free")) << text.out;
}

// SQLite counts a plain lock's waiters (its queue, schema version 4): a
// `dlock run` waiting in another process is one.
TEST_F(CliMessages, StatusCountsWaitersOnSqlite) {
  const std::string url = "sqlite://" + server.dir() + "/w.db";
  LogSink log;
  auto client = Client::connect(url, quiet(log));
  auto held = client.try_acquire("w").value();
  auto waiter = spawn({kCli, "run", "--url", url, "w", "--", "true"}, {}, server.dir() + "/out");
  ASSERT_TRUE(eventually([&] { return client.inspect("w").value().waiters.value_or(0) == 1; }, 10s));
  auto text = dlock({"status", "--url", url, "w"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(has(text.out, "1 waiting")) << text.out;
  auto js = dlock({"status", "--json", "--url", url, "w"});
  EXPECT_EQ(nlohmann::json::parse(js.out)["waiters"], 1) << js.out;
  ASSERT_TRUE(held.release().ok());
  EXPECT_EQ(wait_exit(waiter.pid, 10s), 0);
  EXPECT_EQ(client.inspect("w").value().waiters, 0u);
}

// PostgreSQL counts a plain lock's waiters (its queue, schema version 6 and later).
TEST_F(CliMessages, StatusCountsWaitersOnPostgres) {
  PostgresServer pg;
  LogSink log;
  auto client = Client::connect(pg.url(), quiet(log));
  auto other = Client::connect(pg.url(), quiet(log));
  auto held = client.try_acquire("w").value();
  auto waiting = std::async(std::launch::async, [&] { return other.acquire("w", 5s); });
  ASSERT_TRUE(eventually([&] { return client.inspect("w").value().waiters.value_or(0) == 1; }, 5s));
  auto text = dlock({"status", "--url", pg.url(), "w"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(has(text.out, "1 waiting")) << text.out;
  ASSERT_TRUE(held.release().ok());
  EXPECT_TRUE(waiting.get().ok());
}

TEST_F(CliMessages, HintsForACorruptSqliteFileSpeakOfTheFile) {
  const std::string path = server.dir() + "/corrupt.db";
  {
    std::ofstream f(path);
    for (int i = 0; i < 200; ++i) f << "this is not a lock store\n";
  }
  auto r = dlock({"status", "--url", "sqlite://" + path, "x"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(has(r.err, "key")) << r.err;
  EXPECT_FALSE(has(r.err, "EVAL")) << r.err;
  EXPECT_TRUE(has(r.err, "file")) << r.err;
}

// A lock file this user may not write (root is not bound by permissions:
// then the tool runs as nobody).
TEST_F(CliMessages, HintsForAReadOnlySqliteFileSpeakOfTheFile) {
  TempDir dir;
  const std::string db = dir.file("ro.db"), url = "sqlite://" + db;
  ASSERT_EQ(dlock({"migrate", url}).exit_code, 0);
  ASSERT_EQ(::chmod(db.c_str(), 0444), 0);
  std::vector<std::string> args = {kCli, "run", "--wait", "0", "--url", url, "x", "--", "true"};
  if (::geteuid() == 0) {
    ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
    args.insert(args.begin(), {"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"});
  }
  auto r = run(args, 30s);
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_FALSE(has(r.err, "ACL") || has(r.err, "EVAL") || has(r.err, "key")) << r.err;
  EXPECT_TRUE(has(r.err, "write")) << r.err;
}

// With HOME unset the default store is in /tmp/dlock-UID, where another
// user may plant a symbolic link to a directory of the victim's own; stat
// followed it. Runs as nobody (root plants the link).
TEST_F(CliMessages, ADefaultDirectoryLinkedByAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as two users";
  TempDir dir;
  const std::string target = dir.file("nobodys");
  ASSERT_EQ(::mkdir(target.c_str(), 0700), 0);
  ASSERT_EQ(::chown(target.c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string link = "/tmp/dlock-65534";
  ::unlink(link.c_str());
  ::rmdir(link.c_str());
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);  // root's link, to nobody's directory
  auto r = run({"env", "-u", "HOME", "-u", "XDG_STATE_HOME", "setpriv", "--reuid=65534", "--regid=65534",
                "--clear-groups", kCli, "run", "--wait", "0", "x", "--", "true"},
               30s);
  ::unlink(link.c_str());
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "symbolic link")) << r.err;
  EXPECT_FALSE(std::filesystem::exists(target + "/locks.db")) << "the store was made through the link";
}

TEST_F(CliMessages, PostgresHintsSpeakOfRolesAndReadOnlySessions) {
  PostgresServer pg;
  pg.psql(
      "CREATE ROLE app LOGIN; REVOKE CREATE ON SCHEMA public FROM PUBLIC; "
      "CREATE ROLE ro LOGIN; ALTER ROLE ro SET default_transaction_read_only = on");
  const std::string base = "@127.0.0.1:" + std::to_string(pg.port()) + "/postgres";
  auto refused = dlock({"status", "--url", "postgres://app" + base, "job"});
  EXPECT_EQ(refused.exit_code, 77) << refused.err;
  EXPECT_FALSE(has(refused.err, "EVAL")) << refused.err;
  EXPECT_FALSE(has(refused.err, "ACL")) << refused.err;
  auto read_only = dlock({"run", "--url", "postgres://ro" + base, "job", "--", "true"});
  EXPECT_NE(read_only.exit_code, 0);
  EXPECT_FALSE(has(read_only.err, "is the server running")) << read_only.err;
  EXPECT_TRUE(has(read_only.err, "read-only")) << read_only.err;
}

}  // namespace
}  // namespace dlock::test

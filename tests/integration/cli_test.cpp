// The dlock tool, run as a user would, against a real redis-server.
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "integration/common.hpp"
#include "support/postgres_server.hpp"
#include "support/temp_dir.hpp"

namespace dlock::test {
namespace {

const std::string kCli = DLOCK_CLI_PATH;

class Cli : public ::testing::Test {
 protected:
  RedisServer server;
  Env env() const { return {{"DLOCK_URL", server.url()}}; }
  RunResult dlock(std::vector<std::string> args, std::chrono::milliseconds timeout = 30s) {
    args.insert(args.begin(), kCli);
    return run(args, timeout, env());
  }
};

TEST_F(Cli, RunsTheCommandWithNameAndFenceAndReturnsItsStatus) {
  auto r = dlock({"run", "job", "--", "sh", "-c", "echo \"$DLOCK_NAME $DLOCK_FENCE\"; exit 3"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  ASSERT_TRUE(r.out.starts_with("job ")) << r.out;
  const std::uint64_t fence = std::stoull(r.out.substr(4));
  EXPECT_GT(fence, 0u);
  EXPECT_EQ(r.err, "") << "quiet by default, as flock(1): cron mails only about trouble";
  auto again = dlock({"run", "-v", "job", "--", "sh", "-c", "echo $DLOCK_FENCE"});
  EXPECT_EQ(again.exit_code, 0);
  const std::string next = std::to_string(fence + 1);
  EXPECT_EQ(again.out, next + "\n");
  EXPECT_NE(again.err.find("acquired 'job' (fence " + next + ")"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("released 'job'"), std::string::npos) << again.err;
  auto quiet = dlock({"run", "--quiet", "job", "--", "true"});
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_EQ(quiet.err, "") << "--quiet prints nothing on success";
}

TEST_F(Cli, VersionMatchesTheLibrary) {
  auto r = dlock({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "dlock " + std::string(dlock::version()) + "\n");
  EXPECT_EQ(std::string(dlock::version()), DLOCK_VERSION_STRING);
}

// Who holds it: the run's command, its pid and host, and for how long, in
// status (text and JSON), list, and the busy message of another run.
TEST_F(Cli, StatusListAndBusyRunsNameTheHolder) {
  TempDir dir;
  const std::string ready = dir.file("holder-ready");
  const std::string done = dir.file("holder-done");
  // Held until the test says so, 30 s at most (a fixed 3 s ran out on a
  // loaded machine under a sanitizer before the checks below were done).
  std::thread holder([&] {
    dlock({"run", "--label", "nightly-report", "nightly", "--", "sh", "-c",
           "touch " + ready + "; i=0; while [ ! -e " + done + " ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"});
  });
  ASSERT_TRUE(eventually([&] { return std::ifstream(ready).good(); }, 10s));
  auto text = dlock({"status", "nightly"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("nightly: held by nightly-report["), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("]@"), std::string::npos) << text.out;
  auto js = nlohmann::json::parse(dlock({"status", "--json", "nightly"}).out);
  const std::string who = js["holder"].get<std::string>();
  EXPECT_TRUE(who.starts_with("nightly-report[")) << who;
  ASSERT_TRUE(js["held_for_ms"].is_number()) << js.dump();
  EXPECT_GE(js["held_for_ms"].get<long long>(), 0);
  EXPECT_LT(js["held_for_ms"].get<long long>(), 10000);
  auto busy = dlock({"run", "--wait", "0", "nightly", "--", "true"});
  EXPECT_EQ(busy.exit_code, 75);
  EXPECT_NE(busy.err.find("'nightly' is held by " + who + " for "), std::string::npos) << busy.err;
  auto listed = dlock({"list"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("nightly: held by " + who), std::string::npos) << listed.out;
  auto listed_json = nlohmann::json::parse(dlock({"list", "--json", "night"}).out);
  ASSERT_EQ(listed_json.size(), 1u) << listed_json.dump();
  EXPECT_EQ(listed_json[0]["name"], "nightly");
  EXPECT_EQ(listed_json[0]["holder"], who);
  EXPECT_EQ(nlohmann::json::parse(dlock({"list", "--json", "other"}).out).size(), 0u);
  std::ofstream(done).flush();
  holder.join();
  EXPECT_EQ(nlohmann::json::parse(dlock({"list", "--json"}).out).size(), 0u) << "released: listed no more";
}

// For the node exporter's textfile collector: several names, one exposition.
TEST_F(Cli, StatusOfSeveralNamesAndForPrometheus) {
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  auto held = client.acquire("p1", 0ms).value();
  auto text = dlock({"status", "p1", "p2"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("p1: held by "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("p2: free"), std::string::npos) << text.out;
  auto prom = dlock({"status", "--prometheus", "p1", "p2"});
  EXPECT_EQ(prom.exit_code, 0) << prom.err;
  EXPECT_NE(prom.out.find("# TYPE dlock_lock_held gauge"), std::string::npos) << prom.out;
  EXPECT_NE(prom.out.find("dlock_lock_held{lock=\"p1\"} 1\n"), std::string::npos) << prom.out;
  EXPECT_NE(prom.out.find("dlock_lock_held{lock=\"p2\"} 0\n"), std::string::npos) << prom.out;
  EXPECT_NE(prom.out.find("dlock_lock_fence{lock=\"p1\"} " + std::to_string(held.fence()) + "\n"), std::string::npos)
      << prom.out;
  EXPECT_EQ(dlock({"status", "--prometheus", "p1", "p1"}).exit_code, 64) << "a name twice would collide";
}

// Not a terminal (cron, a log): one line once the wait lasts, naming what it
// waits for and who holds it; nothing for a wait that ends quickly.
TEST_F(Cli, ALongWaitSaysOnceWhatItWaitsFor) {
  LogSink log;
  ClientOptions o = quiet(log);
  o.describe_holder = true;
  auto client = Client::connect(server.url(), o);
  LockOptions lo;
  lo.holder_label = "backup";
  auto held = client.acquire("slow", 0ms, lo).value();
  std::thread releaser([&] {
    std::this_thread::sleep_for(4s);
    (void)held.release();
  });
  auto r = dlock({"run", "slow", "--", "true"});
  releaser.join();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("dlock: waiting for 'slow' (held by backup["), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line, not one per second: " << r.err;
  auto quick = dlock({"run", "slow", "--", "true"});
  EXPECT_EQ(quick.err, "") << "a wait that did not happen says nothing";
}

// A server that dies while a run waits: the run says it keeps trying.
TEST_F(Cli, AWaitWhoseServerDiedSaysItIsRetrying) {
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  auto held = client.acquire("gone", 0ms).value();
  std::thread killer([&] {
    std::this_thread::sleep_for(500ms);
    server.stop();
  });
  auto r = dlock({"run", "--wait", "6s", "gone", "--", "true"});
  killer.join();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("waiting for 'gone' (the server does not answer, retrying"), std::string::npos) << r.err;
}

TEST_F(Cli, StatusAsTextAndJson) {
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  auto lease = client.try_acquire("st").value();
  auto text = dlock({"status", "st"});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("st: held by "), std::string::npos) << text.out;
  const std::uint64_t fence = lease.fence();
  EXPECT_NE(text.out.find(", fence " + std::to_string(fence) + ", lease "), std::string::npos) << text.out;
  auto js = dlock({"status", "--json", "st"});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j["held"], true);
  EXPECT_EQ(j["fence"], fence);
  EXPECT_EQ(j["reentry_count"], 1);
  EXPECT_GT(j["remaining_ms"].get<long long>(), 0);
  ASSERT_TRUE(lease.release().ok());
  auto freed = nlohmann::json::parse(dlock({"status", "--json", "st"}).out);
  EXPECT_EQ(freed["held"], false);
  EXPECT_EQ(freed["last_fence"], fence);
}

TEST_F(Cli, ExitCodes) {
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  auto held = client.try_acquire("busy").value();
  // Not acquired within --wait: 75.
  auto t0 = Clock::now();
  auto busy = dlock({"run", "--wait", "300ms", "busy", "--", "true"});
  EXPECT_EQ(busy.exit_code, 75) << busy.err;
  EXPECT_GE(ms_since(t0), 300);
  EXPECT_EQ(dlock({"run", "--wait", "0", "busy", "--", "true"}).exit_code, 75);
  // Usage errors: 64, one line on stderr.
  EXPECT_EQ(dlock({"run", "busy"}).exit_code, 64);
  auto bad_ttl = dlock({"run", "--ttl", "soon", "x", "--", "true"});
  EXPECT_EQ(bad_ttl.exit_code, 64);
  EXPECT_NE(bad_ttl.err.find("soon"), std::string::npos);
  EXPECT_EQ(dlock({"run", "--url", "http://x", "x", "--", "true"}).exit_code, 64);
  EXPECT_EQ(dlock({"frobnicate"}).exit_code, 64);
  // A ZooKeeper lock lasts as long as the session: --ttl is refused for
  // every ZooKeeper scheme, before any connection is tried.
  for (const char* url : {"zk://127.0.0.1:1/x", "zk+tls://127.0.0.1:1/x?cacert=/nonexistent"}) {
    auto zk_ttl = dlock({"run", "--url", url, "--ttl", "5s", "x", "--", "true"});
    EXPECT_EQ(zk_ttl.exit_code, 64) << url << ": " << zk_ttl.err;
    EXPECT_NE(zk_ttl.err.find("--ttl does not apply"), std::string::npos) << url << ": " << zk_ttl.err;
  }
  // Unreachable: 69.
  auto down = dlock({"run", "--url", "redis://127.0.0.1:" + std::to_string(free_port()), "x", "--", "true"});
  EXPECT_EQ(down.exit_code, 69);
  EXPECT_NE(down.err.find("reachable"), std::string::npos) << "says what to do: " << down.err;
  // Command not found: 127, and the lock is released.
  EXPECT_EQ(dlock({"run", "nf", "--", "/nonexistent/program"}).exit_code, 127);
  EXPECT_FALSE(client.inspect("nf").value().held);
  // Help: 0, lists the exit codes.
  auto help = dlock({"run", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("79"), std::string::npos);
}

TEST_F(Cli, AuthenticationFailureIs77) {
  RedisServerOptions o;
  o.requirepass = "sesame";
  RedisServer secured(o);
  auto r = run({kCli, "status", "--url", secured.url_with_auth("", "wrong"), "x"}, 30s);
  EXPECT_EQ(r.exit_code, 77) << r.err;
  EXPECT_EQ(r.err.find("wrong"), std::string::npos) << "the password is not echoed";
  auto ok = run({kCli, "status", "--url", secured.url_with_auth("", "sesame"), "x"}, 30s);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

TEST_F(Cli, ConcurrentRunsAreSerialised) {
  // Four shells, each running 10 `dlock run`s of a non-atomic increment.
  constexpr int kShells = 4, kRounds = 10;
  std::string incr = "v=$(redis-cli -p " + std::to_string(server.port()) + " GET counter); sleep 0.005; redis-cli -p " +
                     std::to_string(server.port()) + " SET counter $((${v:-0}+1)) >/dev/null";
  std::string loop = "for i in $(seq " + std::to_string(kRounds) + "); do '" + kCli +
                     "' run --quiet counter -- sh -c '" + incr + "' || exit 1; done";
  std::vector<pid_t> shells;
  for (int s = 0; s < kShells; ++s) shells.push_back(spawn({"sh", "-c", loop}, env()).pid);
  for (pid_t p : shells) EXPECT_EQ(wait_exit(p, 120s), 0);
  EXPECT_EQ(SyncRedis(server.port()).integer({"GET", "counter"}), kShells * kRounds);
}

// No --url, no DLOCK_URL: a SQLite file of the user's, no server. Shells
// doing a non-atomic file increment under `dlock run` lose nothing.
TEST_F(Cli, WithoutAUrlRunsAreSerialisedThroughAFileOfTheUser) {
  const std::string home = server.dir() + "/home", counter = server.dir() + "/counter";
  const Env no_server = {{"DLOCK_URL", ""}, {"HOME", home}, {"XDG_STATE_HOME", ""}};
  constexpr int kShells = 3, kRounds = 10;
  const std::string incr = "v=$(cat " + counter + " 2>/dev/null); sleep 0.005; echo $((${v:-0}+1)) > " + counter;
  const std::string loop = "for i in $(seq " + std::to_string(kRounds) + "); do '" + kCli +
                           "' run --quiet counter -- sh -c '" + incr + "' || exit 1; done";
  std::vector<pid_t> shells;
  for (int s = 0; s < kShells; ++s) shells.push_back(spawn({"sh", "-c", loop}, no_server).pid);
  for (pid_t p : shells) EXPECT_EQ(wait_exit(p, 120s), 0);
  std::ifstream in(counter);
  int v = 0;
  in >> v;
  EXPECT_EQ(v, kShells * kRounds);
  EXPECT_TRUE(std::ifstream(home + "/.local/state/dlock/locks.db").good());
  auto status = run({kCli, "status", "--json", "counter"}, 30s, no_server);
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(nlohmann::json::parse(status.out)["held"], false);
  auto help = run({kCli, "run", "--help"}, 30s, no_server);
  EXPECT_NE(help.out.find(home + "/.local/state/dlock/locks.db"), std::string::npos) << "--help names the file";
}

TEST_F(Cli, LostLockTerminatesTheCommandAndExits79) {
  std::string marker = server.dir() + "/got-term";
  std::string cmd = "trap 'touch " + marker + "; exit 0' TERM; redis-cli -p " + std::to_string(server.port()) +
                    " DEL 'dlock:{lost}' >/dev/null; sleep 20 & wait";
  auto t0 = Clock::now();
  auto r = dlock({"run", "--ttl", "900ms", "--grace", "2s", "lost", "--", "sh", "-c", cmd});
  EXPECT_EQ(r.exit_code, 79) << r.err;
  EXPECT_TRUE(std::ifstream(marker).good()) << "CMD got SIGTERM";
  EXPECT_NE(r.err.find("lost the lock"), std::string::npos) << r.err;
  EXPECT_LT(ms_since(t0), 5000);
}

TEST_F(Cli, CommandIgnoringSigtermIsKilledAfterGrace) {
  std::string cmd =
      "trap '' TERM; redis-cli -p " + std::to_string(server.port()) + " DEL 'dlock:{stubborn}' >/dev/null; sleep 20";
  auto t0 = Clock::now();
  auto r = dlock({"run", "--ttl", "900ms", "--grace", "300ms", "stubborn", "--", "sh", "-c", cmd});
  EXPECT_EQ(r.exit_code, 79) << r.err;
  EXPECT_NE(r.err.find("SIGKILL"), std::string::npos) << r.err;
  EXPECT_LT(ms_since(t0), 5000);
}

TEST_F(Cli, SigtermToDlockIsForwardedToTheCommand) {
  std::string out = server.dir() + "/out";
  auto child = spawn({kCli, "run", "fwd", "--", "sh", "-c", "trap 'exit 42' TERM; sleep 20 & wait"}, env(), out);
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  ASSERT_TRUE(eventually([&] { return client.inspect("fwd").value().held; }, 10s));
  std::this_thread::sleep_for(100ms);  // the shell has set its trap
  ASSERT_EQ(::kill(child.pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit(child.pid, 10s), 42);
  EXPECT_FALSE(client.inspect("fwd").value().held) << "released after the command exited";
}

TEST_F(Cli, KilledDlockRunFreesTheLockWithinItsTtl) {
  std::string out = server.dir() + "/out";
  auto child = spawn({kCli, "run", "--ttl", "2s", "crash", "--", "sleep", "30"}, env(), out);
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  ASSERT_TRUE(eventually([&] { return client.inspect("crash").value().held; }, 10s));
  ASSERT_EQ(::kill(child.pid, SIGKILL), 0);
  auto t0 = Clock::now();
  EXPECT_EQ(wait_exit(child.pid, 5s), 128 + SIGKILL);
  ::kill(-child.pid, SIGKILL);  // in case CMD outlived it (it should not)
  auto lease = client.acquire("crash", 10s);
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  measure("cli_sigkill_recovery", ms_since(t0));
  EXPECT_LE(ms_since(t0), 2000 + 500);
}

// `dlock migrate` makes the table with a role that may, so that an
// application role that may not can use it.
TEST_F(Cli, MigrateMakesThePostgresTableForARoleThatCannot) {
  PostgresServer pg;
  pg.psql("CREATE ROLE app LOGIN; REVOKE CREATE ON SCHEMA public FROM PUBLIC");
  const std::string app = "postgres://app@127.0.0.1:" + std::to_string(pg.port()) + "/postgres";
  auto refused = run({kCli, "status", "--url", app, "job"}, 30s);
  EXPECT_EQ(refused.exit_code, 77) << refused.err;
  EXPECT_NE(refused.err.find("dlock migrate"), std::string::npos) << refused.err;
  auto migrated = run({kCli, "migrate", "--url", pg.url()}, 30s);
  EXPECT_EQ(migrated.exit_code, 0) << migrated.err;
  EXPECT_NE(migrated.out.find("ready"), std::string::npos);
  pg.psql(
      "GRANT SELECT, INSERT, UPDATE, DELETE ON dlock_locks, dlock_locks_meta, dlock_locks_tombstones, "
      "dlock_locks_line, dlock_locks_line_tombs TO app; "
      "GRANT USAGE, SELECT ON dlock_locks_fence, dlock_locks_ticket TO app");
  auto ran = run({kCli, "run", "--url", app, "job", "--", "sh", "-c", "echo $DLOCK_FENCE"}, 30s);
  EXPECT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(ran.out, "1\n");
}

// On SQLite a dead holder's lock passes on at once, so CMD must not outlive
// a dlock killed by SIGKILL: it dies with it.
TEST_F(Cli, AKilledDlockRunTakesTheCommandWithIt) {
  const std::string url = "sqlite://" + server.dir() + "/locks.db", pidfile = server.dir() + "/cmd.pid";
  auto child = spawn({kCli, "run", "--url", url, "job", "--", "sh", "-c", "echo $$ > " + pidfile + "; exec sleep 30"},
                     env(), server.dir() + "/out");
  pid_t cmd = 0;
  ASSERT_TRUE(eventually(
      [&] {
        std::ifstream in(pidfile);
        return static_cast<bool>(in >> cmd) && cmd > 0;
      },
      10s));
  LogSink log;
  auto client = Client::connect(url, quiet(log));
  ASSERT_TRUE(client.inspect("job")->held);
  ASSERT_EQ(::kill(child.pid, SIGKILL), 0);
  EXPECT_EQ(wait_exit(child.pid, 5s), 128 + SIGKILL);
  auto gone = [&] {  // no such process, or a zombie nobody reaped yet
    std::ifstream stat("/proc/" + std::to_string(cmd) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return true;
    const auto paren = line.rfind(')');
    return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
  };
  EXPECT_TRUE(eventually(gone, 5s)) << "CMD still runs without the lock";
  auto lease = client.acquire("job", 5s);  // the default 30 s lease would outlast this wait
  EXPECT_TRUE(lease.ok()) << lease.status().to_string();
}

// Signals while connecting or waiting end dlock without running CMD.
TEST_F(Cli, SignalWhileWaitingExitsWithoutRunningTheCommand) {
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  auto held = client.try_acquire("sigwait").value();
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string marker = server.dir() + "/ran-" + std::to_string(sig);
    auto child = spawn({kCli, "run", "sigwait", "--", "touch", marker}, env(), server.dir() + "/out");
    ASSERT_TRUE(eventually([&] { return client.inspect("sigwait").value().waiters == 1; }, 10s));
    ASSERT_EQ(::kill(child.pid, sig), 0);
    EXPECT_EQ(wait_exit(child.pid, 5s), 128 + sig);
    EXPECT_FALSE(std::ifstream(marker).good()) << "CMD ran after the signal";
  }
  ASSERT_TRUE(held.release().ok());
  EXPECT_FALSE(client.inspect("sigwait").value().held) << "nothing left behind";
}

TEST_F(Cli, SignalWhileConnectingExitsWithoutRunningTheCommand) {
  server.pause();  // connects at the TCP level, never answers the handshake
  const std::string marker = server.dir() + "/ran";
  auto child = spawn({kCli, "run", "sigconn", "--", "touch", marker}, env(), server.dir() + "/out");
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(::kill(child.pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit(child.pid, 5s), 128 + SIGTERM);
  server.resume();
  EXPECT_FALSE(std::ifstream(marker).good());
}

// A loss noticed only at release (the lease ran out between renewals while
// the server was stalled): exit 79, not CMD's status.
TEST_F(Cli, LossNoticedOnlyAtReleaseExits79) {
  std::string cmd = "redis-cli -p " + std::to_string(server.port()) + " DEL 'dlock:{late}' >/dev/null";
  auto r = dlock({"run", "--ttl", "10s", "late", "--", "sh", "-c", cmd});
  EXPECT_EQ(r.exit_code, 79) << r.err;
  EXPECT_NE(r.err.find("was lost before CMD finished"), std::string::npos) << r.err;
}

// dlock's connections to the lock server do not leak into CMD.
TEST_F(Cli, TheCommandInheritsNoConnectionToTheLockServer) {
  auto r = dlock({"run", "fds", "--", "sh", "-c", "ls -l /proc/$$/fd | grep -c socket || true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "0\n") << "CMD inherited sockets";
}

TEST_F(Cli, PasswordOnlyUrlsAreRedacted) {
  auto r = run({kCli, "status", "--url", "redis://hunter2@127.0.0.1:1", "x"}, 30s);
  EXPECT_EQ(r.exit_code, 69) << r.err;
  EXPECT_EQ(r.err.find("hunter2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("redis://***@127.0.0.1:1"), std::string::npos) << r.err;
}

TEST_F(Cli, AHungServerIsAConnectTimeout) {
  server.pause();
  auto r = dlock({"status", "x"});
  server.resume();
  EXPECT_EQ(r.exit_code, 69) << r.err;
  EXPECT_NE(r.err.find("timed out"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("wrong protocol"), std::string::npos) << r.err;
}

TEST_F(Cli, DurationsOutOfRangeAreUsageErrorsOrForever) {
  EXPECT_EQ(dlock({"run", "--ttl", "3ms", "x", "--", "true"}).exit_code, 64);
  EXPECT_EQ(dlock({"run", "--ttl", "9999999999", "x", "--", "true"}).exit_code, 64);
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  auto held = client.try_acquire("forever").value();
  auto child = spawn({kCli, "run", "--wait", "9999999999", "forever", "--", "true"}, env(), server.dir() + "/out");
  EXPECT_EQ(wait_exit(child.pid, 500ms), -1) << "a 317-year wait gave up at once";
  ASSERT_TRUE(held.release().ok());
  EXPECT_EQ(wait_exit(child.pid, 10s), 0);
}

}  // namespace
}  // namespace dlock::test

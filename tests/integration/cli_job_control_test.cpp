// `dlock run` and job control: stop signals (Ctrl-Z) and a terminal.
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "integration/common.hpp"

extern char** environ;

namespace dlock::test {
namespace {

const std::string kCli = DLOCK_CLI_PATH;

// State letter of a process from /proc/PID/stat ('T': stopped), or 0.
char process_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return 0;
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() ? line[paren + 2] : 0;
}

pid_t read_pid(const std::string& file) {
  std::ifstream in(file);
  pid_t pid = 0;
  return in >> pid ? pid : 0;
}

class CliJobControl : public ::testing::Test {
 protected:
  RedisServer server;
  Env env() const { return {{"DLOCK_URL", server.url()}}; }
};

// Ctrl-Z (SIGTSTP to dlock) must not let the lease run out while CMD still
// exists: dlock stops CMD, keeps renewing, and resumes CMD on SIGCONT.
TEST_F(CliJobControl, StopSignalStopsTheCommandAndKeepsTheLock) {
  const std::string dir = server.dir(), pidfile = dir + "/cmd.pid", go = dir + "/go", out = dir + "/out";
  const std::string cmd = "echo $$ > " + pidfile + "; while [ ! -e " + go + " ]; do sleep 0.02; done; echo finished";
  // A lease the watchdog keeps on a loaded host under a sanitizer (renewed
  // every 500 ms; a 500 ms lease was lost there once).
  // bash, not sh: dash runs `sleep` by vfork, and a stop that catches the
  // child between vfork and exec leaves the shell waiting for it in state
  // 'D', never 'T' (the job is stopped all the same, but it cannot say so).
  auto dlock = spawn({kCli, "run", "--ttl", "1500ms", "tstp", "--", "bash", "-c", cmd}, env(), out);
  pid_t cmd_pid = 0;
  ASSERT_TRUE(eventually([&] { return (cmd_pid = read_pid(pidfile)) > 0; }, 10s));
  for (int sig : {SIGTSTP, SIGTTIN, SIGTTOU}) {
    ASSERT_EQ(::kill(dlock.pid, sig), 0);
    EXPECT_TRUE(eventually([&] { return process_state(cmd_pid) == 'T'; }, 5s)) << strsignal(sig);
    std::ofstream(go).flush();            // CMD would finish now if it ran
    std::this_thread::sleep_for(2000ms);  // past the 1500 ms lease: only renewals keep it
    EXPECT_NE(process_state(dlock.pid), 'T') << "dlock itself stopped: nothing renews the lease";
    EXPECT_EQ(process_state(cmd_pid), 'T') << "CMD runs on";
    auto second = run({kCli, "run", "--wait", "0", "tstp", "--", "true"}, 30s, env());
    EXPECT_EQ(second.exit_code, 75) << "a second holder while the first CMD exists: " << second.err;
    if (sig != SIGTTOU) {
      ::unlink(go.c_str());
      ASSERT_EQ(::kill(dlock.pid, SIGCONT), 0);
      EXPECT_TRUE(eventually([&] { return process_state(cmd_pid) != 'T'; }, 5s)) << "SIGCONT resumes CMD";
    }
  }
  ASSERT_EQ(::kill(dlock.pid, SIGCONT), 0);
  EXPECT_EQ(wait_exit(dlock.pid, 10s), 0);
  std::ifstream in(out);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(all.find("finished"), std::string::npos) << all;
  EXPECT_NE(all.find("stopped"), std::string::npos) << "dlock says CMD is stopped: " << all;
}

// Only `dlock run` handles signals itself; `status` keeps their defaults.
TEST_F(CliJobControl, SigtermEndsAStatusWaitingForItsServer) {
  server.pause();  // the status waits for the handshake
  auto status = spawn({kCli, "status", "x"}, env(), server.dir() + "/out");
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(::kill(status.pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit(status.pid, 1s), 128 + SIGTERM);
  server.resume();
}

// dlock in a pseudo-terminal, as a shell's foreground job.
class PtyDlock {
 public:
  PtyDlock(const std::vector<std::string>& args, const Env& extra) {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      if (!extra.count(entry.substr(0, entry.find('=')))) env_strings.push_back(entry);
    }
    for (const auto& [k, v] : extra) env_strings.push_back(k + "=" + v);
    std::vector<char*> argv, envp;
    argv.push_back(const_cast<char*>(kCli.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_ = forkpty(&master_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {  // only async-signal-safe calls: the test has threads
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
  }
  ~PtyDlock() {
    if (pid_ > 0 && wait_exit(pid_, 0ms) == -1) {
      ::kill(pid_, SIGKILL);
      wait_exit(pid_, 5s);
    }
    if (master_ >= 0) close(master_);
  }
  pid_t pid() const { return pid_; }
  void type(const std::string& keys) { ASSERT_EQ(write(master_, keys.data(), keys.size()), (ssize_t)keys.size()); }
  // Reads the terminal until `needle` appears or `limit` passes.
  bool expect(const std::string& needle, std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    while (seen_.find(needle) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{master_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buf[4096];
      const ssize_t n = read(master_, buf, sizeof buf);
      if (n <= 0) return seen_.find(needle) != std::string::npos;
      seen_.append(buf, static_cast<std::size_t>(n));
    }
    return true;
  }
  const std::string& seen() const { return seen_; }

 private:
  pid_t pid_ = -1;
  int master_ = -1;
  std::string seen_;
};

// An interactive CMD reads the terminal (it is the foreground job), and
// Ctrl-C reaches it: dlock releases the lock.
TEST_F(CliJobControl, InteractiveCommandReadsTheTerminalAndCtrlCEndsIt) {
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  {
    PtyDlock d({"run", "tty", "--", "sh", "-c", "echo ready; read a; echo \"got $a\""}, env());
    ASSERT_TRUE(d.expect("ready", 10s)) << d.seen();
    d.type("hello\n");
    EXPECT_TRUE(d.expect("got hello", 5s)) << "CMD could not read the terminal: " << d.seen();
    EXPECT_EQ(wait_exit(d.pid(), 5s), 0) << d.seen();
  }
  {
    PtyDlock d({"run", "tty", "--", "sh", "-c", "echo ready; read a; echo \"got $a\""}, env());
    ASSERT_TRUE(d.expect("ready", 10s)) << d.seen();
    d.type("\x03");  // Ctrl-C
    EXPECT_EQ(wait_exit(d.pid(), 5s), 128 + SIGINT) << d.seen();
    EXPECT_FALSE(client.inspect("tty").value().held);
  }
}

// Ctrl-Z in the terminal stops CMD; dlock keeps the lock and takes the
// terminal back, so Ctrl-C then ends CMD and dlock releases the lock.
TEST_F(CliJobControl, CtrlZInATerminalStopsTheCommandAndCtrlCThenEndsIt) {
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  PtyDlock d({"run", "--ttl", "500ms", "ttyz", "--", "sh", "-c", "echo ready; read a; echo \"got $a\""}, env());
  ASSERT_TRUE(d.expect("ready", 10s)) << d.seen();
  d.type("\x1a");  // Ctrl-Z
  ASSERT_TRUE(d.expect("stopped", 5s)) << d.seen();
  std::this_thread::sleep_for(1000ms);  // past the lease
  EXPECT_TRUE(client.inspect("ttyz").value().held);
  EXPECT_EQ(client.try_acquire("ttyz").code(), Errc::busy);
  d.type("\x03");  // Ctrl-C, now to dlock
  EXPECT_EQ(wait_exit(d.pid(), 5s), 128 + SIGINT) << d.seen();
  EXPECT_FALSE(client.inspect("ttyz").value().held);
}

// On a terminal a waiting run keeps one status line current (who holds it,
// how long it has waited) and erases it when the lock comes, before CMD
// writes anything.
TEST_F(CliJobControl, AWaitOnATerminalKeepsAStatusLineAndErasesIt) {
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  LockOptions lo;
  lo.holder_label = "deploy";
  auto held = client.acquire("ttyw", 0ms, lo).value();
  PtyDlock d({"run", "ttyw", "--", "sh", "-c", "echo ran"}, env());
  ASSERT_TRUE(d.expect("waiting for 'ttyw' (held by deploy[", 10s)) << d.seen();
  ASSERT_TRUE(d.expect("waited 3", 10s)) << "kept current: " << d.seen();
  ASSERT_TRUE(held.release().ok());
  ASSERT_TRUE(d.expect("ran", 10s)) << d.seen();
  EXPECT_EQ(wait_exit(d.pid(), 5s), 0) << d.seen();
  const std::string& s = d.seen();
  const auto erased = s.rfind("\r\033[K");
  ASSERT_NE(erased, std::string::npos) << s;
  EXPECT_LT(erased, s.find("ran")) << "the line is erased before CMD writes: " << s;
  EXPECT_EQ(s.substr(0, s.find("ran")).find('\n'), std::string::npos)
      << "one line rewritten in place, not one per second: " << s;
}

}  // namespace
}  // namespace dlock::test

// Self-test of the test fixtures (process.hpp, redis_server.hpp). Not part of
// the CMake build; needs only GoogleTest, redis-server, redis-cli and openssl.
// From the repository root:
//
//   g++ -std=c++20 -Itests tests/support/process.cpp tests/support/redis_server.cpp
//       tests/support/redis_server_selftest.cpp -lgtest_main -lgtest -pthread -o /tmp/selftest
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "support/process.hpp"
#include "support/redis_server.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

// True once `pid` is gone or a zombie (an orphan is reaped late by PID 1).
bool process_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  auto close_paren = line.rfind(')');
  return close_paren != std::string::npos && close_paren + 2 < line.size() && line[close_paren + 2] == 'Z';
}

bool wait_gone(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!process_gone(pid)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// A listening socket on 127.0.0.1:port, or -1.
int listen_on(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 4) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

RunResult plain_cli(int port, const std::vector<std::string>& args, std::chrono::milliseconds timeout = 3s) {
  std::vector<std::string> argv = {"redis-cli", "-h", "127.0.0.1", "-p", std::to_string(port)};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, timeout);
}

TEST(Process, RunCapturesOutputAndStatus) {
  RunResult r = run({"sh", "-c", "echo out; echo err >&2; exit 3"}, 5s);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
}

TEST(Process, RunPassesEnvironment) {
  RunResult r = run({"sh", "-c", "echo \"$DLOCK_SELFTEST_VAR\""}, 5s, {{"DLOCK_SELFTEST_VAR", "hello"}});
  EXPECT_EQ(r.out, "hello\n");
}

TEST(Process, RunKillsOnTimeout) {
  auto start = std::chrono::steady_clock::now();
  RunResult r = run({"sh", "-c", "sleep 30 & sleep 30"}, 200ms);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(Process, MissingProgramIsAClearError) {
  try {
    (void)spawn({"dlock-no-such-program"});
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("dlock-no-such-program"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not found"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)spawn({"/nonexistent/prog"}), std::runtime_error);
}

TEST(Process, ChildrenDoNotInheritDescriptors) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);  // deliberately without CLOEXEC
  ASSERT_GE(::dup2(fd, 100), 0);
  RunResult r = run({"sh", "-c", "ls /proc/$$/fd"}, 5s);
  ::close(100);
  ::close(fd);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.find("100"), std::string::npos) << r.out;
}

TEST(Process, WaitExitReportsStatusSignalAndTimeout) {
  Child c = spawn({"sh", "-c", "exit 7"});
  EXPECT_EQ(wait_exit(c.pid, 5s), 7);
  Child s = spawn({"sleep", "30"});
  EXPECT_EQ(wait_exit(s.pid, 50ms), -1);
  ::kill(s.pid, SIGKILL);
  EXPECT_EQ(wait_exit(s.pid, 5s), 128 + SIGKILL);
  EXPECT_EQ(wait_exit(s.pid, 10ms), -2);  // already reaped
}

TEST(Process, ForkChildReturnsBodyResult) {
  EXPECT_EQ(wait_exit(fork_child([] { return 0; }), 5s), 0);
  EXPECT_EQ(wait_exit(fork_child([] { return 42; }), 5s), 42);
  EXPECT_EQ(wait_exit(fork_child([]() -> int { throw std::runtime_error("boom"); }), 5s), 125);
}

TEST(RedisServer, FreePortIsBindable) {
  int port = free_port();
  EXPECT_GT(port, 0);
  int fd = listen_on(port);
  EXPECT_GE(fd, 0);
  ::close(fd);
}

TEST(RedisServer, PlainStartsAndAnswers) {
  RedisServer server;
  EXPECT_GT(server.port(), 0);
  EXPECT_GT(server.pid(), 0);
  EXPECT_EQ(server.url(), "redis://127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(server.host_port(), "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_TRUE(std::filesystem::is_directory(server.dir()));
  EXPECT_EQ(server.ca_file(), "");
  EXPECT_EQ(server.cli({"PING"}), "PONG");
  EXPECT_EQ(server.cli({"SET", "k", "v"}), "OK");
  EXPECT_EQ(server.cli({"GET", "k"}), "v");
  EXPECT_EQ(server.cli({"CONFIG", "GET", "save"}), "save");  // empty value trimmed
  EXPECT_EQ(server.cli({"CONFIG", "GET", "appendonly"}), "appendonly\nno");
  EXPECT_EQ(server.cli({"CONFIG", "GET", "bind"}), "bind\n127.0.0.1");
  EXPECT_EQ(server.cli({"DEBUG", "SLEEP", "0"}), "OK");  // enable_debug
  EXPECT_EQ(server.url_with_auth("al ice", "p@ss"),
            "redis://al%20ice:p%40ss@127.0.0.1:" + std::to_string(server.port()));
}

TEST(RedisServer, DebugCanBeDisabled) {
  RedisServerOptions options;
  options.enable_debug = false;
  RedisServer server(options);
  EXPECT_NE(server.cli({"DEBUG", "SLEEP", "0"}).find("ERR"), std::string::npos);
}

TEST(RedisServer, ExtraArgs) {
  RedisServerOptions options;
  options.extra_args = {"--maxmemory", "7mb"};
  RedisServer server(options);
  EXPECT_EQ(server.cli({"CONFIG", "GET", "maxmemory"}), "maxmemory\n7340032");
}

TEST(RedisServer, DestructorStopsProcessAndRemovesDir) {
  pid_t pid;
  std::string dir;
  {
    RedisServer server;
    pid = server.pid();
    dir = server.dir();
  }
  EXPECT_TRUE(process_gone(pid));
  EXPECT_NE(::kill(pid, 0), 0);  // reaped, not a zombie
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(RedisServer, TlsOnly) {
  RedisServerOptions options;
  options.tls = true;
  RedisServer server(options);
  const std::string port = std::to_string(server.port());
  EXPECT_EQ(server.url(), "rediss://127.0.0.1:" + port + "?cacert=" + server.dir() + "/ca.crt");
  EXPECT_EQ(server.ca_file(), server.dir() + "/ca.crt");
  EXPECT_TRUE(std::filesystem::exists(server.ca_file()));
  EXPECT_EQ(server.cli({"PING"}), "PONG");
  // No plain-text port, and plain text on the TLS port fails.
  EXPECT_NE(plain_cli(server.port(), {"PING"}).out, "PONG\n");
  // The server certificate verifies for the IP and for localhost.
  RunResult ip = run(
      {"openssl", "verify", "-CAfile", server.ca_file(), "-verify_ip", "127.0.0.1", server.dir() + "/server.crt"}, 10s);
  EXPECT_EQ(ip.exit_code, 0) << ip.out << ip.err;
  RunResult host = run(
      {"openssl", "verify", "-CAfile", server.ca_file(), "-verify_hostname", "localhost", server.dir() + "/server.crt"},
      10s);
  EXPECT_EQ(host.exit_code, 0) << host.out << host.err;
  RunResult wrong_ip = run(
      {"openssl", "verify", "-CAfile", server.ca_file(), "-verify_ip", "127.0.0.2", server.dir() + "/server.crt"}, 10s);
  EXPECT_NE(wrong_ip.exit_code, 0);

  // A second CA does not verify the server.
  std::string other = make_ca(server.dir(), "other");
  EXPECT_EQ(other, server.dir() + "/other.crt");
  RunResult wrong = run({"openssl", "verify", "-CAfile", other, server.dir() + "/server.crt"}, 10s);
  EXPECT_NE(wrong.exit_code, 0);
  RunResult cli_wrong = run({"redis-cli", "-h", "127.0.0.1", "-p", port, "--tls", "--cacert", other, "PING"}, 5s);
  EXPECT_NE(cli_wrong.out, "PONG\n");

  // Restart keeps the port and the certificates.
  server.stop();
  server.start();
  EXPECT_EQ(server.cli({"PING"}), "PONG");
  EXPECT_EQ(std::to_string(server.port()), port);
}

TEST(RedisServer, TlsClientAuth) {
  RedisServerOptions options;
  options.tls = true;
  options.tls_client_auth = true;
  RedisServer server(options);
  EXPECT_EQ(server.url(), "rediss://127.0.0.1:" + std::to_string(server.port()) + "?cacert=" + server.dir() +
                              "/ca.crt&cert=" + server.dir() + "/client.crt&key=" + server.dir() + "/client.key");
  EXPECT_EQ(server.cli({"PING"}), "PONG");  // with the client certificate
  RunResult anonymous = run({"redis-cli", "-h", "127.0.0.1", "-p", std::to_string(server.port()), "--tls", "--cacert",
                             server.ca_file(), "PING"},
                            5s);
  EXPECT_NE(anonymous.out, "PONG\n");
}

TEST(RedisServer, RequirePass) {
  RedisServerOptions options;
  options.requirepass = "s3cret";
  RedisServer server(options);
  EXPECT_EQ(server.cli({"PING"}), "PONG");
  EXPECT_NE(plain_cli(server.port(), {"PING"}).out.find("NOAUTH"), std::string::npos);
  EXPECT_EQ(server.cli_as("", "s3cret", {"ACL", "WHOAMI"}), "default");
}

TEST(RedisServer, AclUsers) {
  RedisServerOptions options;
  options.requirepass = "adminpw";
  options.acl_rules = {"alice on >secret ~* &* +@all", "bob on >bobpw ~bob:* +get"};
  RedisServer server(options);
  EXPECT_EQ(server.cli_as("alice", "secret", {"ACL", "WHOAMI"}), "alice");
  EXPECT_EQ(server.cli_as("bob", "bobpw", {"GET", "bob:x"}), "");
  EXPECT_NE(server.cli_as("bob", "bobpw", {"SET", "bob:x", "1"}).find("NOPERM"), std::string::npos);
  // redis-cli reports the failed AUTH on stderr and goes on unauthenticated.
  EXPECT_NE(server.cli_as("alice", "wrong", {"PING"}).find("NOAUTH"), std::string::npos);
}

TEST(RedisServer, TlsWithAcl) {
  RedisServerOptions options;
  options.tls = true;
  options.requirepass = "pw";
  options.acl_rules = {"alice on >secret ~* &* +@all"};
  RedisServer server(options);
  EXPECT_EQ(server.cli({"PING"}), "PONG");
  EXPECT_EQ(server.cli_as("alice", "secret", {"ACL", "WHOAMI"}), "alice");
}

TEST(RedisServer, StopStartKeepsPortLosesData) {
  RedisServer server;
  const int port = server.port();
  const pid_t first = server.pid();
  server.cli({"SET", "k", "v"});
  server.stop();
  EXPECT_FALSE(server.running());
  EXPECT_EQ(server.pid(), -1);
  EXPECT_TRUE(process_gone(first));
  EXPECT_THROW(server.cli({"PING"}), std::runtime_error);
  server.stop();  // no-op
  server.start();
  EXPECT_EQ(server.port(), port);
  EXPECT_NE(server.pid(), first);
  EXPECT_EQ(server.cli({"GET", "k"}), "");
  EXPECT_THROW(server.start(), std::logic_error);

  server.kill9();
  EXPECT_FALSE(server.running());
  server.start();
  EXPECT_EQ(server.port(), port);
  EXPECT_EQ(server.cli({"PING"}), "PONG");

  // Ended by itself: start() works without stop().
  server.cli({"SHUTDOWN", "NOSAVE"});
  server.start();
  EXPECT_EQ(server.cli({"PING"}), "PONG");
}

TEST(RedisServer, StartWaitsForABrieflyTakenPort) {
  RedisServer server;
  server.stop();
  int fd = listen_on(server.port());
  ASSERT_GE(fd, 0);
  std::thread release([fd] {
    std::this_thread::sleep_for(300ms);
    ::close(fd);
  });
  server.start();
  release.join();
  EXPECT_EQ(server.cli({"PING"}), "PONG");
}

TEST(RedisServer, PauseResume) {
  RedisServer server;
  server.pause();
  server.pause();  // no-op
  EXPECT_TRUE(server.paused());
  RunResult r = plain_cli(server.port(), {"PING"}, 500ms);
  EXPECT_TRUE(r.timed_out);
  server.resume();
  server.resume();  // no-op
  EXPECT_FALSE(server.paused());
  EXPECT_EQ(server.cli({"PING"}), "PONG");
  // Stopping a paused server is quick.
  server.pause();
  auto start = std::chrono::steady_clock::now();
  server.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_FALSE(server.paused());
  EXPECT_THROW(server.pause(), std::logic_error);
  server.start();
  EXPECT_EQ(server.cli({"PING"}), "PONG");
}

TEST(RedisServer, BadArgumentsGiveTheLog) {
  RedisServerOptions options;
  options.extra_args = {"--no-such-option", "1"};
  try {
    RedisServer server(options);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("exited with status"), std::string::npos) << what;
    EXPECT_NE(what.find("no-such-option"), std::string::npos) << what;
  }
}

TEST(RedisServer, MissingRedisServerIsAClearError) {
  std::string old_path = std::getenv("PATH");
  std::string empty = std::filesystem::temp_directory_path() / "dlock-selftest-empty-path";
  std::filesystem::create_directories(empty);
  ::setenv("PATH", empty.c_str(), 1);
  try {
    RedisServer server;
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("redis-server"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not found in PATH"), std::string::npos) << e.what();
  }
  ::setenv("PATH", old_path.c_str(), 1);
  std::filesystem::remove(empty);
}

TEST(RedisServer, ServerDiesWithACrashedTestProcess) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t child = fork_child([&] {
    ::close(fds[0]);
    RedisServer server;
    pid_t pid = server.pid();
    if (::write(fds[1], &pid, sizeof pid) != sizeof pid) return 1;
    if (::write(fds[1], server.dir().data(), server.dir().size()) < 0) return 1;
    ::close(fds[1]);
    ::raise(SIGKILL);  // no destructors
    return 0;
  });
  ::close(fds[1]);
  pid_t server_pid = -1;
  ASSERT_EQ(::read(fds[0], &server_pid, sizeof server_pid), static_cast<ssize_t>(sizeof server_pid));
  std::string dir;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) dir.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  EXPECT_EQ(wait_exit(child, 10s), 128 + SIGKILL);
  EXPECT_TRUE(wait_gone(server_pid, 5s));
  ASSERT_NE(dir.find("dlock-redis-"), std::string::npos);
  // The owner is gone (reaped above), so its directory is stale. A test
  // process starting in parallel may sweep it first, so its presence before
  // the sweep is not asserted.
  remove_stale_server_dirs();
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(RedisServer, StaleDirSweepSparesLiveOwners) {
  RedisServer server;
  remove_stale_server_dirs();
  EXPECT_TRUE(std::filesystem::exists(server.dir() + "/owner"));
  EXPECT_EQ(server.cli({"PING"}), "PONG");
}

TEST(RedisServer, ManyAtOnce) {
  std::vector<std::unique_ptr<RedisServer>> servers;
  for (int i = 0; i < 6; ++i) servers.push_back(std::make_unique<RedisServer>());
  for (auto& s : servers) EXPECT_EQ(s->cli({"PING"}), "PONG");
}

}  // namespace
}  // namespace dlock::test

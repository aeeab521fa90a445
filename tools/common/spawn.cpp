#include "common/spawn.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace dlock::tools {
namespace {

using Clock = std::chrono::steady_clock;

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

std::string errno_text(int err) { return std::strerror(err); }

bool on_main_thread() { return static_cast<pid_t>(::syscall(SYS_gettid)) == ::getpid(); }

// Full path of an executable: as given if it contains '/', else from PATH.
std::string find_program(const std::string& name) {
  if (name.empty()) throw std::runtime_error("spawn: empty argv[0]");
  if (name.find('/') != std::string::npos) return name;
  const char* path_env = std::getenv("PATH");
  std::string path = path_env != nullptr && *path_env != '\0' ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  throw std::runtime_error("cannot start '" + name + "': not found in PATH (" + path +
                           "); is the package that provides it installed?");
}

std::vector<std::string> make_env(const Env& additions) {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry = *e;
    std::string key = entry.substr(0, entry.find('='));
    if (additions.count(key) == 0) out.push_back(std::move(entry));
  }
  for (const auto& [key, value] : additions) out.push_back(key + "=" + value);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// In the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void exec_child(const char* path, char* const* argv, char* const* envp, const SpawnOptions& options,
                             int report_fd, bool tie_to_parent, pid_t parent) {
  auto fail = [report_fd](int err) {
    [[maybe_unused]] auto n = ::write(report_fd, &err, sizeof err);
    ::_exit(127);
  };
  if (options.isolate) ::setpgid(0, 0);
  if (tie_to_parent) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(errno);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
  }
  // A clean signal state for the new program.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) ::sigaction(sig, &dfl, nullptr);

  int in = ::open("/dev/null", O_RDONLY);
  if (in < 0 || ::dup2(in, 0) < 0) fail(errno);
  if (options.out_fd >= 0 && ::dup2(options.out_fd, 1) < 0) fail(errno);
  if (options.err_fd >= 0 && ::dup2(options.err_fd, 2) < 0) fail(errno);
  if (!options.output_file.empty() && (options.out_fd < 0 || options.err_fd < 0)) {
    int out = ::open(options.output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out < 0 || (options.out_fd < 0 && ::dup2(out, 1) < 0) || (options.err_fd < 0 && ::dup2(out, 2) < 0))
      fail(errno);
  }
  // No fd of the parent (client sockets, listeners, other children's pipes)
  // may outlive exec: a server holding a copy would keep connections open
  // after the parent closed them, a dead driver's ports would still accept.
  if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int fd = 3; fd < 4096; ++fd) {
      if (fd != report_fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
  }
  ::execve(path, argv, envp);
  fail(errno);
  ::_exit(127);  // not reached
}

}  // namespace

std::string join_args(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += a.empty() || a.find_first_of(" \t'\"") != std::string::npos ? "'" + a + "'" : a;
  }
  return out;
}

pid_t spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty()) throw std::runtime_error("spawn: empty argv");
  std::string path = find_program(argv[0]);
  std::vector<std::string> args = argv;
  std::vector<std::string> envs = make_env(options.env);
  std::vector<char*> c_args = c_strings(args);
  std::vector<char*> c_envs = c_strings(envs);

  // The child writes exec's errno here; exec closes it (O_CLOEXEC) on success.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) throw std::runtime_error("pipe2: " + errno_text(errno));
  const bool tie = options.isolate && on_main_thread();
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(report[0]);
    ::close(report[1]);
    throw std::runtime_error("fork: " + errno_text(err));
  }
  if (pid == 0) exec_child(path.c_str(), c_args.data(), c_envs.data(), options, report[1], tie, parent);
  if (options.isolate) ::setpgid(pid, pid);  // also done by the child; whoever runs first wins
  ::close(report[1]);
  int err = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n > 0) {
    wait_exit(pid, std::chrono::seconds(5));
    throw std::runtime_error("cannot execute '" + path + "' (" + join_args(argv) + "): " + errno_text(err));
  }
  return pid;
}

int wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto nap = std::chrono::milliseconds(1);
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      continue;  // not reported without WUNTRACED/WCONTINUED; keep waiting
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      return -2;
    }
    if (Clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::milliseconds(20));
  }
}

}  // namespace dlock::tools

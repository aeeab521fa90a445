#include "support/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace dlock::test {
namespace {

using Clock = std::chrono::steady_clock;

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

std::string errno_text(int err) { return std::strerror(err); }

bool on_main_thread() { return static_cast<pid_t>(::syscall(SYS_gettid)) == ::getpid(); }

// An fd that closes itself.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

void make_pipe(Fd& read_end, Fd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2: " + errno_text(errno));
  read_end.reset(fds[0]);
  write_end.reset(fds[1]);
}

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

// What the child of spawn_impl does with its standard streams.
struct Redirect {
  const char* output_file = nullptr;  // stdout + stderr, appended
  int out_fd = -1;                    // or: dup2 to stdout
  int err_fd = -1;                    //     and stderr
};

// In the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void exec_child(const char* path, char* const* argv, char* const* envp, const Redirect& redirect,
                             int report_fd, bool tie_to_parent, pid_t parent) {
  auto fail = [report_fd](int err) {
    [[maybe_unused]] auto n = ::write(report_fd, &err, sizeof err);
    ::_exit(127);
  };
  ::setpgid(0, 0);
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
  if (redirect.output_file != nullptr) {
    int out = ::open(redirect.output_file, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0) fail(errno);
  } else {
    if (redirect.out_fd >= 0 && ::dup2(redirect.out_fd, 1) < 0) fail(errno);
    if (redirect.err_fd >= 0 && ::dup2(redirect.err_fd, 2) < 0) fail(errno);
  }
  // No fd of the test process (client sockets!) may outlive exec: a server
  // holding a copy would keep connections open after the test closed them.
  if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int fd = 3; fd < 4096; ++fd) {
      if (fd != report_fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
  }
  ::execve(path, argv, envp);
  fail(errno);
  ::_exit(127);  // not reached
}

Child spawn_impl(const std::vector<std::string>& argv, const Env& env, const Redirect& redirect) {
  if (argv.empty()) throw std::runtime_error("spawn: empty argv");
  std::string path = find_program(argv[0]);
  std::vector<std::string> args = argv;
  std::vector<std::string> envs = make_env(env);
  std::vector<char*> c_args = c_strings(args);
  std::vector<char*> c_envs = c_strings(envs);

  Fd report_read, report_write;
  make_pipe(report_read, report_write);
  const bool tie = on_main_thread();
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork: " + errno_text(errno));
  if (pid == 0) {
    exec_child(path.c_str(), c_args.data(), c_envs.data(), redirect, report_write.get(), tie, parent);
  }
  ::setpgid(pid, pid);  // also done by the child; whoever runs first wins
  report_write.reset();
  int err = 0;
  ssize_t n;
  do {
    n = ::read(report_read.get(), &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    wait_exit(pid, std::chrono::seconds(5));
    throw std::runtime_error("cannot execute '" + path + "' (" + join_args(argv) + "): " + errno_text(err));
  }
  return Child{pid};
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

Child spawn(const std::vector<std::string>& argv, const Env& env, const std::string& output_file) {
  Redirect redirect;
  if (!output_file.empty()) redirect.output_file = output_file.c_str();
  return spawn_impl(argv, env, redirect);
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

int thread_count() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  int threads = -1;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "Threads: %d", &threads) == 1) break;
  }
  std::fclose(f);
  return threads;
}

bool under_thread_sanitizer() {
#if defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

pid_t fork_child(std::function<int()> body) {
  if (under_thread_sanitizer()) {
    // TSan runs a background thread of its own once any thread was started.
    int threads = thread_count() - 1;
    if (threads > 1) {
      std::fprintf(stderr,
                   "fork_child: warning: forking with %d threads under ThreadSanitizer; the child dies "
                   "(exit 66) if it starts a thread. Fork before creating clients in the parent.\n",
                   threads);
    }
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);  // or buffered output would be written twice
  const bool tie = on_main_thread();
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork: " + errno_text(errno));
  if (pid > 0) return pid;
  if (tie) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
  }
  int code = 125;
  try {
    code = body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fork_child: uncaught exception: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "fork_child: uncaught exception\n");
  }
  std::cout.flush();
  std::fflush(nullptr);
  ::_exit(code);
}

RunResult run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout, const Env& env) {
  Fd out_read, out_write, err_read, err_write;
  make_pipe(out_read, out_write);
  make_pipe(err_read, err_write);
  Redirect redirect;
  redirect.out_fd = out_write.get();
  redirect.err_fd = err_write.get();
  Child child = spawn_impl(argv, env, redirect);
  out_write.reset();
  err_write.reset();

  RunResult result;
  auto deadline = Clock::now() + timeout;
  bool killed = false;
  pollfd fds[2] = {{out_read.get(), POLLIN, 0}, {err_read.get(), POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_count = 2;
  while (open_count > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      if (killed) break;  // something outside the group still holds the pipes
      ::kill(-child.pid, SIGKILL);
      ::kill(child.pid, SIGKILL);
      killed = true;
      result.timed_out = true;
      deadline = Clock::now() + std::chrono::seconds(1);
      continue;
    }
    int r = ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 100)));
    if (r < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[4096];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
  auto left = std::max(deadline - Clock::now(), Clock::duration::zero());
  int code = wait_exit(child.pid, std::chrono::duration_cast<std::chrono::milliseconds>(left));
  if (code == -1) {  // closed its output but still running at the deadline
    ::kill(-child.pid, SIGKILL);
    ::kill(child.pid, SIGKILL);
    result.timed_out = true;
    code = wait_exit(child.pid, std::chrono::seconds(5));
  }
  result.exit_code = result.timed_out ? -1 : code;
  return result;
}

}  // namespace dlock::test

#include "support/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <thread>

namespace dlock::test {
namespace {

using Clock = std::chrono::steady_clock;

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

}  // namespace

Child spawn(const std::vector<std::string>& argv, const Env& env, const std::string& output_file) {
  tools::SpawnOptions options;
  options.env = env;
  options.output_file = output_file;
  return Child{.pid = tools::spawn(argv, options)};
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
  tools::SpawnOptions options;
  options.env = env;
  options.out_fd = out_write.get();
  options.err_fd = err_write.get();
  Child child{.pid = tools::spawn(argv, options)};
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

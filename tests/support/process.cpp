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

std::string errno_text(int err) { return std::strerror(err); }

bool on_main_thread() { return static_cast<pid_t>(::syscall(SYS_gettid)) == ::getpid(); }

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

}  // namespace dlock::test

#include "run_command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "job_control.hpp"
#include "messages.hpp"

namespace dlock::cli {
namespace {

void say(const Command& c, const std::string& text) {
  if (!c.quiet) std::cerr << "dlock: " << text << '\n';
}

// The child: own process group (the terminal's foreground group if `tty` is
// given), default signal mask, nothing of dlock's inherited but stdio (the
// lock server's sockets are close-on-exec anyway).
// It dies with dlock: a dlock killed by SIGKILL holds nothing any more (a
// SQLite lock passes on at once), so CMD must not run on without it.
[[noreturn]] void exec_child(std::vector<char*>& argv, int errno_fd, pid_t parent, int tty) {
  setpgid(0, 0);
  give_terminal(tty, getpid());
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(128 + SIGKILL);  // dlock died before the line above
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  constexpr unsigned kCloexec = 1u << 2;  // CLOSE_RANGE_CLOEXEC (Linux 5.11)
  if (syscall(SYS_close_range, 3u, ~0u, kCloexec) != 0) {
    const long max = std::min(sysconf(_SC_OPEN_MAX), 65536L);
    for (int fd = 3; fd < max; ++fd)
      if (fd != errno_fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  execvp(argv[0], argv.data());
  int e = errno;
  (void)!write(errno_fd, &e, sizeof e);
  _exit(e == ENOENT ? 127 : 126);
}

// A signal to dlock, applied to CMD's group (see job_control.hpp): CMD is in
// its own group, so terminal signals reach it only through here, except
// while it is the terminal's foreground job.
void pass_on(Job& job, int sig) {
  if (sig == SIGCHLD) return;
  if (sig == SIGCONT) {
    // `fg` after `dlock run ... &`: the terminal is dlock's now; CMD's next.
    if (job.tty < 0) job.tty = foreground_terminal();
    give_terminal(job.tty, job.pid);
    kill(-job.pid, SIGCONT);
    // Running again as of now: CMD tells its parent only once it runs, and a
    // stop signal that comes first must still stop it (it was dropped while
    // `stopped` waited for that news, and CMD ran on with the lock kept).
    job.stopped = false;
    return;
  }
  if (is_stop_signal(sig)) {
    kill(-job.pid, sig);  // a group stopped already stays so
    return;
  }
  kill(-job.pid, sig);
  if (job.stopped) kill(-job.pid, SIGCONT);  // a stopped CMD must run to act on it
}

// Reaps CMD's changes of state. True when it ended (`status` set).
bool reap(const Command& c, Job& job, int& status) {
  for (;;) {
    int st = 0;
    const pid_t r = waitpid(job.pid, &st, WNOHANG | WUNTRACED | WCONTINUED);
    if (r != job.pid) return false;
    if (WIFSTOPPED(st)) {
      if (job.stopped) continue;
      job.stopped = true;
      // Ctrl-C must reach dlock now, which can end CMD; a stopped
      // foreground group would swallow it.
      give_terminal(job.tty, getpgrp());
      say(c, std::string("CMD stopped (SIG") + sigabbrev_np(WSTOPSIG(st)) + "); " + c.held_as + " '" +
                 shown_name(c.lock_name) + "' is kept while it is stopped: kill -CONT " + std::to_string(getpid()) +
                 " resumes it, Ctrl-C or kill -TERM " + std::to_string(getpid()) + " ends it");
    } else if (WIFCONTINUED(st)) {
      job.stopped = false;
      give_terminal(job.tty, job.pid);
    } else {
      status = st;
      return true;
    }
  }
}

}  // namespace

int supervise(const Command& c, Job& job, int sig_fd, int lost_fd, bool& lost) {
  using Clock = std::chrono::steady_clock;
  constexpr Clock::time_point kNever = Clock::time_point::max();
  Clock::time_point kill_at = kNever;
  int child_status = 0;
  for (;;) {
    int timeout_ms = -1;
    if (kill_at != kNever) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(kill_at - Clock::now()).count();
      timeout_ms = static_cast<int>(std::max<long long>(0, left));
    }
    pollfd fds[2] = {{sig_fd, POLLIN, 0}, {lost_fd, POLLIN, 0}};
    int n = poll(fds, 2, timeout_ms);
    if (n < 0 && errno != EINTR) {
      // Cannot watch any more: do not leave CMD running unsupervised.
      std::cerr << "dlock: poll failed (" << std::strerror(errno) << "): stopping CMD\n";
      kill(-job.pid, SIGKILL);
      waitpid(job.pid, &child_status, 0);
      return child_status;
    }
    if (kill_at != kNever && Clock::now() >= kill_at) {
      say(c, "CMD still running " + c.grace_text + " after SIGTERM: sending SIGKILL");
      kill(-job.pid, SIGKILL);
      kill_at = kNever;
    }
    if (n > 0 && (fds[1].revents & POLLIN) && !lost) {
      std::uint64_t v;
      (void)!read(lost_fd, &v, sizeof v);
      lost = true;
      std::cerr << "dlock: lost " << c.held_as << " '" << shown_name(c.lock_name)
                << "' while CMD ran: sending it SIGTERM\n";
      pass_on(job, SIGTERM);
      kill_at = Clock::now() + c.grace;
    }
    if (n > 0 && (fds[0].revents & POLLIN)) {
      signalfd_siginfo si;
      while (read(sig_fd, &si, sizeof si) == sizeof si) pass_on(job, static_cast<int>(si.ssi_signo));
    }
    // SIGCHLD may coalesce: ask directly.
    if (reap(c, job, child_status)) return child_status;
  }
}

pid_t spawn_command(const Command& c, std::uint64_t fence, int tty) {
  // Environment and argv prepared before fork: only async-signal-safe calls
  // between fork and exec.
  setenv("DLOCK_NAME", c.lock_name.c_str(), 1);
  setenv("DLOCK_FENCE", std::to_string(fence).c_str(), 1);
  for (const auto& [key, value] : c.env) setenv(key.c_str(), value.c_str(), 1);
  std::vector<char*> argv;
  for (const auto& a : c.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int exec_errno_pipe[2];
  if (pipe2(exec_errno_pipe, O_CLOEXEC) != 0) {
    std::cerr << "dlock: pipe failed: " << std::strerror(errno) << '\n';
    return -1;
  }

  const pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0) {
    std::cerr << "dlock: fork failed: " << std::strerror(errno) << '\n';
    close(exec_errno_pipe[0]);
    close(exec_errno_pipe[1]);
    return -1;
  }
  if (child == 0) exec_child(argv, exec_errno_pipe[1], parent, tty);
  setpgid(child, child);  // also here: no race with the first signal
  give_terminal(tty, child);
  close(exec_errno_pipe[1]);
  int exec_errno = 0;
  bool exec_failed = read(exec_errno_pipe[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno;
  close(exec_errno_pipe[0]);
  if (exec_failed) std::cerr << "dlock: cannot run '" << c.argv[0] << "': " << std::strerror(exec_errno) << '\n';

  return child;
}

}  // namespace dlock::cli

#include "lock_command.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "exit_codes.hpp"
#include "hints.hpp"
#include "job_control.hpp"
#include "messages.hpp"
#include "run_command.hpp"
#include "wait_status.hpp"

namespace dlock::cli {
namespace {

using namespace std::chrono_literals;

// CMD's program name, without its directory: what status shows of a run.
std::string command_label(const std::vector<std::string>& command) {
  if (command.empty()) return {};
  const std::string& program = command.front();
  const auto slash = program.find_last_of('/');
  return slash == std::string::npos ? program : program.substr(slash + 1);
}

int status_to_exit(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Terminating signals read from the signalfd: the first one, or 0. Every
// queued signal is consumed. Stop signals are dropped: nothing runs yet to
// stop, and a waiter that stopped could be granted a lease that runs out
// before CMD starts. SIGCHLD is left to the caller.
int take_terminating_signal(int sig_fd) {
  signalfd_siginfo si;
  int first = 0;
  while (read(sig_fd, &si, sizeof si) == sizeof si) {
    const int sig = static_cast<int>(si.ssi_signo);
    if (sig != SIGCHLD && sig != SIGCONT && !dlock::cli::is_stop_signal(sig) && first == 0) first = sig;
  }
  return first;
}

// Waits until `done_fd` is readable or a terminating signal arrives on
// `sig_fd`. Returns the signal, or 0 when done_fd fired. `tick`, if given,
// runs about once a second meanwhile.
int wait_or_signal(int sig_fd, int done_fd, const std::function<void()>& tick = {}) {
  for (;;) {
    pollfd fds[2] = {{sig_fd, POLLIN, 0}, {done_fd, POLLIN, 0}};
    const int ready = poll(fds, 2, tick ? 1000 : -1);
    if (ready == 0) {
      tick();
      continue;
    }
    if (ready < 0) {
      if (errno == EINTR) continue;
      return SIGTERM;  // cannot wait: give up as if told to stop
    }
    if (fds[0].revents & POLLIN)
      if (int sig = take_terminating_signal(sig_fd); sig != 0) return sig;
    if (fds[1].revents & POLLIN) return 0;
  }
}

int interrupted(const Common& common, int sig, const std::string& phase) {
  say(common, std::string("interrupted by ") + strsignal(sig) + " while " + phase + "; CMD was not run");
  return 128 + sig;
}

// A one-shot result handed from the client's I/O thread to the main loop.
template <class T>
struct Handoff {
  Handoff() : fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~Handoff() {
    if (fd >= 0) close(fd);
  }
  void set(T v) {
    {
      std::lock_guard lk(mu);
      value.emplace(std::move(v));
    }
    std::uint64_t one = 1;
    (void)!write(fd, &one, sizeof one);
  }
  std::optional<T> take() {
    std::lock_guard lk(mu);
    return std::exchange(value, std::nullopt);
  }
  int fd;
  std::mutex mu;
  std::optional<T> value;
};

// A Handoff, or null (told on stderr, exit_code set) if it has no eventfd.
template <class T>
std::shared_ptr<Handoff<T>> make_handoff(int& exit_code) {
  auto h = std::make_shared<Handoff<T>>();
  if (h->fd >= 0) return h;
  std::cerr << "dlock: eventfd failed: " << std::strerror(errno) << '\n';
  exit_code = dlock::cli::kSoftware;
  return nullptr;
}

// Connects in the background so that a signal ends the wait at once.
std::optional<dlock::Client> connect_interruptibly(const Common& c, const std::string& name, int sig_fd,
                                                   int& exit_code) {
  auto result = make_handoff<int>(exit_code);
  auto client = std::make_shared<std::optional<dlock::Client>>();
  if (!result) return std::nullopt;
  std::thread connecting([c, name, result, client] {
    int code = 0;
    *client = connect(c, code, name);
    result->set(code);
  });
  if (int sig = wait_or_signal(sig_fd, result->fd); sig != 0) {
    // The connecting thread cannot be stopped; nothing is held yet, so end
    // the process here rather than race its exit.
    std::cerr.flush();
    _exit(interrupted(c, sig, "connecting"));
  }
  // Joined, not detached: a thread still exiting while the process exits
  // races the crypto library's clean-up of its per-thread state.
  connecting.join();
  exit_code = *result->take();
  return std::move(*client);
}

// Who holds `name` now, as its holder described itself ("another owner"
// if it is not known).
std::string current_holder(const dlock::Client& client, const std::string& name) {
  auto info = client.inspect(name);
  if (!info.ok() || !info->held || info->holder.empty()) return "another owner";
  return dlock::cli::holder_text(*info);
}

// --permits N: digits only (no sign, space, hex or exponent), 1..kMaxPermits.
std::optional<unsigned> parse_permits(const std::string& text) {
  unsigned n = 0;
  const char* end = text.data() + text.size();
  auto [at, ec] = std::from_chars(text.data(), end, n);
  if (text.empty() || ec != std::errc() || at != end || n < 1 || n > dlock::kMaxPermits) return std::nullopt;
  return n;
}

// What a run waits for, in its status line.
std::string waited_for(const RunOptions& o) {
  const std::string name = "'" + shown_name(o.name) + "'";
  if (o.elect) return "the leadership of " + name;
  if (o.counted) return "one of the " + o.permits + " permits of " + name;
  if (o.shared) return "a read lock on " + name;
  return name;
}

// The exit code of an acquire that did not succeed: busy or timed out is
// EX_TEMPFAIL, anything else as the error says.
int not_acquired(const Common& common, const dlock::Client& client, const RunOptions& o, milliseconds wait,
                 const dlock::Status& s) {
  if (s.code() == dlock::Errc::busy || s.code() == dlock::Errc::timeout) {
    if (!common.quiet) {
      const std::string released = wait.count() == 0 ? "" : " and was not released within --wait";
      if (o.elect)
        std::cerr << "dlock: '" << shown_name(o.name) << "' is led by another candidate" << released << '\n';
      else if (o.counted)
        std::cerr << "dlock: all " << o.permits << " permits of '" << shown_name(o.name) << "' are taken"
                  << (wait.count() == 0 ? "" : " and none was released within --wait") << '\n';
      else
        std::cerr << "dlock: '" << shown_name(o.name) << "' is held by " << current_holder(client, o.name) << released
                  << '\n';
    }
    return dlock::cli::kTempFail;
  }
  return fail(s, std::string(o.elect ? "cannot campaign for '" : "cannot acquire '") + o.name + "'", common.url,
              o.name);
}

// Waits for `fd` (a Handoff's) or a signal, with the wait's status line on
// a terminal; the signal, or 0.
int wait_showing_status(const Common& common, const dlock::Client& client, const RunOptions& o, milliseconds wait,
                        int sig_fd, int fd) {
  dlock::cli::WaitStatus status(client, o.name, waited_for(o), isatty(STDERR_FILENO) != 0,
                                common.quiet || wait.count() == 0);
  const int sig = wait_or_signal(sig_fd, fd, [&status] { status.tick(); });
  status.finish();
  return sig;
}

// Acquires NAME, waiting up to `wait`; a signal ends the wait (the Client's
// shutdown then undoes whatever the acquire may have been granted, and a
// place in a line is left at once).
std::optional<dlock::Lease> acquire_interruptibly(const Common& common, const dlock::Client& client,
                                                  const RunOptions& o, milliseconds wait, const dlock::LockOptions& lo,
                                                  int sig_fd, int& exit_code) {
  auto result = make_handoff<dlock::Result<dlock::Lease>>(exit_code);
  if (!result) return std::nullopt;
  client.async_acquire(o.name, wait, lo, [result](dlock::Result<dlock::Lease> r) { result->set(std::move(r)); });
  const int sig = wait_showing_status(common, client, o, wait, sig_fd, result->fd);
  if (sig != 0) {
    exit_code = interrupted(common, sig, "waiting for '" + shown_name(o.name) + "'");
    return std::nullopt;  // a lease granted meanwhile is released with `result`
  }
  auto lease = std::move(*result->take());
  if (lease.ok()) return std::move(lease.value());
  exit_code = not_acquired(common, client, o, wait, lease.status());
  return std::nullopt;
}

// A blocking call of a recipe (`take`: true once granted, false on
// contention, throws dlock::Error otherwise) on a thread of its own, so that
// a signal ends the wait. The recipes have no asynchronous form that a
// signal could cancel: the signal ends the process, and the place it kept
// in the name's line lapses with its lease (--ttl).
std::optional<dlock::Status> take_interruptibly(const Common& common, const dlock::Client& client, const RunOptions& o,
                                                milliseconds wait, int sig_fd, std::function<bool()> take,
                                                int& exit_code) {
  auto result = make_handoff<dlock::Status>(exit_code);
  if (!result) return std::nullopt;
  std::thread taking([take = std::move(take), result] {
    try {
      result->set(take() ? dlock::Status() : dlock::Status(dlock::Errc::timeout, "not granted"));
    } catch (const dlock::Error& e) {
      result->set(e.status());
    } catch (const std::exception& e) {
      result->set(dlock::Status(dlock::Errc::server_error, e.what()));
    }
  });
  const int sig = wait_showing_status(common, client, o, wait, sig_fd, result->fd);
  if (sig != 0) {
    // The call cannot be stopped; nothing runs yet, so end the process here
    // rather than race the waiting thread.
    exit_code = interrupted(common, sig, "waiting for '" + shown_name(o.name) + "'");
    std::cerr.flush();
    _exit(exit_code);
  }
  taking.join();
  return result->take();
}

// What CMD runs under: a lease, a read lock or a permit.
struct Held {
  std::uint64_t fence = 0;
  std::stop_token lost;
  std::function<dlock::Status()> release;  // gives it back; errors as Lease::release
};

std::string default_candidate_id() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "localhost");
  return std::string(host) + ":" + std::to_string(getpid());
}

// Takes what `o` asks for: a lock (fair or not), a read lock, a permit, or
// the leadership (a fair lock whose holder is the candidate id, as
// dlock::Election campaigns: taken here through async_acquire so that a
// signal leaves the line at once).
std::optional<Held> hold_interruptibly(const Common& common, const dlock::Client& client, const RunOptions& o,
                                       milliseconds wait, const dlock::LockOptions& lo, int sig_fd, int& exit_code) {
  Held held;
  if (o.shared || o.counted) {
    std::function<bool()> take;
    if (o.shared) {
      auto rw = std::make_shared<dlock::SharedMutex>(client, o.name, lo);
      take = [rw, wait] { return rw->try_lock_shared_for(wait); };
      held.release = [rw] {
        rw->unlock_shared();
        return rw->last_release_status();
      };
      auto status = take_interruptibly(common, client, o, wait, sig_fd, take, exit_code);
      if (!status) return std::nullopt;
      if (!status->ok()) {
        exit_code = not_acquired(common, client, o, wait, *status);
        return std::nullopt;
      }
      held.fence = rw->fence();
      held.lost = rw->lost_token();
    } else {
      auto sem = std::make_shared<dlock::Semaphore>(client, o.name, *parse_permits(o.permits), lo);
      take = [sem, wait] { return sem->try_acquire_for(wait); };
      held.release = [sem] { return sem->release(); };
      auto status = take_interruptibly(common, client, o, wait, sig_fd, take, exit_code);
      if (!status) return std::nullopt;
      if (!status->ok()) {
        exit_code = not_acquired(common, client, o, wait, *status);
        return std::nullopt;
      }
      held.fence = sem->fences().front();
      held.lost = sem->lost_token();
    }
    return held;
  }
  auto lease = acquire_interruptibly(common, client, o, wait, lo, sig_fd, exit_code);
  if (!lease) return std::nullopt;
  auto shared_lease = std::make_shared<dlock::Lease>(std::move(*lease));
  held.fence = shared_lease->fence();
  held.lost = shared_lease->lost_token();
  held.release = [shared_lease] { return shared_lease->release(); };
  return held;
}

// Gives the lock back after CMD ended; the exit code: CMD's, or the
// lost-lock code when the lock did not last until CMD ended.
int release_and_exit(const Common& common, const dlock::cli::Command& command, Held& held, bool lost,
                     int child_status) {
  dlock::Status released = held.release();
  if (lost) return dlock::cli::kLockLost;
  const std::string& name = command.lock_name;
  // A loss noticed only now (the lease ran out between renewals): CMD ran
  // part of the time without the lock. That is the lost-lock exit, not CMD's.
  if (released.code() == dlock::Errc::not_owner || released.code() == dlock::Errc::not_held ||
      released.code() == dlock::Errc::lease_lost) {
    std::cerr << "dlock: " << command.held_as << " '" << shown_name(name)
              << "' was lost before CMD finished: " << dlock::cli::tidy(released.to_string(), name) << '\n';
    return dlock::cli::kLockLost;
  }
  if (!released.ok()) {
    std::cerr << "dlock: " << (command.held_as == "the lock on" ? "releasing '" : "resigning '") << shown_name(name)
              << "' failed: " << dlock::cli::tidy(released.to_string(), name) << " (it expires by its lease)\n";
  } else {
    say(common, (command.held_as == "the lock on" ? "released '" : "resigned '") + shown_name(name) + "'");
  }
  return status_to_exit(child_status);
}

}  // namespace

namespace {

// A usage error in run's or elect's options, told on stderr (kUsage), or 0.
int check_run_options(const Common& common, const RunOptions& o, milliseconds ttl, const std::string& id) {
  if (ttl < dlock::kMinWatchdogLease || ttl > dlock::kMaxLease) {
    std::cerr << "dlock: --ttl must be between " << dlock::kMinWatchdogLease.count()
              << "ms (renewed every ttl/3, a shorter lease runs out between renewals) and "
              << dlock::kMaxLease.count() / 3'600'000 << "h\n";
    return dlock::cli::kUsage;
  }
  if (o.ttl_given && dlock::cli::store_of(common.url) == dlock::cli::Store::zookeeper) {
    std::cerr << "dlock: --ttl does not apply to zk:// URLs: a ZooKeeper lock lasts as long as the client's "
                 "session; set its timeout in the URL (?session_timeout=10s)\n";
    return dlock::cli::kUsage;
  }
  if (o.ttl_given && dlock::cli::store_of(common.url) == dlock::cli::Store::etcd) {
    std::cerr << "dlock: --ttl does not apply to etcd:// URLs: an etcd lock lasts as long as the client's "
                 "lease; set its TTL in the URL (?session_timeout=10s)\n";
    return dlock::cli::kUsage;
  }
  if (o.shared && o.counted) {
    std::cerr << "dlock: --shared and --permits do not go together: --shared takes a read lock (readers overlap, "
                 "a plain run excludes them), --permits N one of N permits\n";
    return dlock::cli::kUsage;
  }
  if (o.counted && !parse_permits(o.permits)) {
    std::cerr << "dlock: --permits takes a whole number from 1 to " << dlock::kMaxPermits << ", not '" << o.permits
              << "'\n";
    return dlock::cli::kUsage;
  }
  if (o.elect && id.size() > dlock::kMaxHolderInfo) {
    std::cerr << "dlock: --id must be at most " << dlock::kMaxHolderInfo << " bytes\n";
    return dlock::cli::kUsage;
  }
  return 0;
}

dlock::LockOptions run_lock_options(const RunOptions& o, milliseconds ttl, const std::string& id) {
  dlock::LockOptions lo;
  lo.watchdog_lease = ttl;
  lo.renew_interval = std::max(ttl / 3, milliseconds(1));
  if (o.elect) {
    lo.fair = true;  // candidates wait in line, as dlock::Election's
    lo.holder = id;  // what status and Election::leader() show
  } else {
    lo.fair = o.fair;
    // Who holds it, for dlock status and list: CMD's name (or --label),
    // this process and host.
    lo.holder_label = o.label.empty() ? command_label(o.command) : o.label;
  }
  return lo;
}

// "acquired ..." or "leading ...", unless --quiet.
void announce(const Common& common, const RunOptions& o, std::uint64_t fence, const std::string& id) {
  if (o.elect)
    say(common, "leading '" + shown_name(o.name) + "' as '" + dlock::cli::shown_holder(id) + "' (term " +
                    std::to_string(fence) + ")");
  else
    say(common, "acquired '" + shown_name(o.name) + "' (" +
                    (o.shared    ? std::string("shared, ")
                     : o.counted ? "one of " + o.permits + " permits, "
                                 : std::string()) +
                    "fence " + std::to_string(fence) + ")");
}

}  // namespace

int cmd_run(const Common& common, const RunOptions& o) {
  const milliseconds ttl = *parse_duration(o.ttl);
  const milliseconds grace = *parse_duration(o.grace);
  const milliseconds wait = o.wait.empty() ? dlock::kForever : dlock::to_wait(*parse_duration(o.wait));
  const std::string id = o.elect && o.id.empty() ? default_candidate_id() : o.id;
  if (int usage = check_run_options(common, o, ttl, id); usage != 0) return usage;
  const int sig_fd = [] {
    sigset_t sigs = dlock::cli::handled_signals();
    return signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
  }();
  if (sig_fd < 0) {
    std::cerr << "dlock: signalfd failed: " << std::strerror(errno) << '\n';
    return dlock::cli::kSoftware;
  }

  int code = 0;
  auto client = connect_interruptibly(common, o.name, sig_fd, code);
  if (!client) return code;
  auto held = hold_interruptibly(common, *client, o, wait, run_lock_options(o, ttl, id), sig_fd, code);
  if (!held) return code;
  announce(common, o, held->fence, id);
  library_logs = true;

  // Lost-lock notification into the poll loop.
  const int lost_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (lost_fd < 0) {
    std::cerr << "dlock: eventfd failed: " << std::strerror(errno) << '\n';
    return dlock::cli::kSoftware;
  }
  std::stop_callback on_lost(held->lost, [lost_fd] {
    std::uint64_t one = 1;
    (void)!write(lost_fd, &one, sizeof one);
  });

  dlock::cli::Command command;
  command.lock_name = o.name;
  command.argv = o.command;
  command.grace = grace;
  command.grace_text = o.grace;
  command.quiet = common.quiet;
  if (o.elect) {
    command.held_as = "the leadership of";
    command.env = {{"DLOCK_TERM", std::to_string(held->fence)}, {"DLOCK_ID", id}};
  }
  dlock::cli::Job job;
  job.tty = dlock::cli::foreground_terminal();
  job.pid = dlock::cli::spawn_command(command, held->fence, job.tty);
  if (job.pid < 0) return dlock::cli::kSoftware;
  bool lost = false;
  const int child_status = dlock::cli::supervise(command, job, sig_fd, lost_fd, lost);
  dlock::cli::give_terminal(job.tty, getpgrp());
  close(sig_fd);

  return release_and_exit(common, command, *held, lost, child_status);
}

}  // namespace dlock::cli

// dlock: the command-line tool.
//
//   dlock run [options] NAME -- CMD [ARGS...]   run CMD while holding NAME
//                                                (--fair, --shared, --permits N)
//   dlock elect [options] NAME -- CMD [ARGS...] run CMD while leading NAME
//   dlock status [options] NAME                  show NAME's state
//   dlock migrate [options] [URL]                make a SQL store's lock table
//
// Uses only the public API.
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <dlock/dlock.hpp>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "default_url.hpp"
#include "exit_codes.hpp"
#include "hints.hpp"
#include "job_control.hpp"
#include "messages.hpp"
#include "run_command.hpp"
#if DLOCK_CLI_WITH_TX
#include "tx_command.hpp"
#endif
#include "wait_status.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::milliseconds;
using dlock::cli::shown_name;

const char* kExitCodesHelp =
    "Exit codes:\n"
    "  CMD's own status    dlock run, elect: CMD ran under the lock (128+N if a signal N ended it)\n"
    "  64  (EX_USAGE)      bad arguments, URL or option values\n"
    "  66  (EX_NOINPUT)    dlock tx: no transaction log at the URL (none is created)\n"
    "  69  (EX_UNAVAILABLE) the lock server is unreachable (or an outcome was lost)\n"
    "  70  (EX_SOFTWARE)   the store refused (wrong key type, not a lock file or table, unexpected reply)\n"
    "  75  (EX_TEMPFAIL)   the lock (or leadership) was not acquired within --wait\n"
    "  77  (EX_NOPERM)     authentication, permission or TLS verification failed\n"
    "  79                  the lock (or leadership) was lost while CMD ran (CMD got SIGTERM, then\n"
    "                      SIGKILL after --grace), or found lost when releasing it after CMD ended\n"
    "  130 / 143 ...       SIGINT / SIGTERM (128+N) before CMD started: CMD was not run\n"
    "  126 / 127           CMD is not executable / not found\n";

// "500ms", "30s", "2m", "1h", or a bare number of seconds ("0.5").
std::optional<milliseconds> parse_duration(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    return std::nullopt;
  }
  std::string unit = text.substr(used);
  double scale = 1000;
  if (unit == "ms")
    scale = 1;
  else if (unit.empty() || unit == "s")
    scale = 1000;
  else if (unit == "m")
    scale = 60'000;
  else if (unit == "h")
    scale = 3'600'000;
  else
    return std::nullopt;
  if (!(value >= 0) || value * scale > 1e15) return std::nullopt;
  return milliseconds(static_cast<long long>(value * scale + 0.5));
}

// CLI11 validator for durations.
struct DurationValidator : CLI::Validator {
  DurationValidator() {
    name_ = "DURATION";
    func_ = [](std::string& s) {
      return parse_duration(s) ? std::string() : "'" + s + "' is not a duration like 500ms, 30s, 2m";
    };
  }
};

// The first argument before "--" that looks like an option none of `apps`
// knows, or empty.
std::string unknown_option(int argc, char** argv, std::initializer_list<CLI::App*> apps) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-' || (arg[1] >= '0' && arg[1] <= '9')) continue;
    const std::string key = arg.substr(0, arg.find('='));
    bool known = false;
    for (CLI::App* app : apps) known = known || app->get_option_no_throw(key) != nullptr;
    if (!known) return dlock::cli::redact_urls(key);
  }
  return {};
}

// Arguments that hold a URL ("--url=URL" counts from its '='), and
// DLOCK_URL: what an argument error may quote verbatim.
std::vector<std::string> url_arguments(int argc, char** argv) {
  std::vector<std::string> urls;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.find("://") == std::string_view::npos) continue;
    urls.emplace_back(arg);
    if (const auto eq = arg.find('='); eq != std::string_view::npos && eq < arg.find("://"))
      urls.emplace_back(arg.substr(eq + 1));
  }
  if (const char* env = std::getenv("DLOCK_URL"); env != nullptr) urls.emplace_back(env);
  return urls;
}

struct Common {
  std::string url;
  bool quiet = false;    // -q: errors only (no warnings, no wait status)
  bool verbose = false;  // -v: also what went well (acquired, released)
  bool json = false;
};

// What went well: said only with -v (quiet by default, as flock(1) is, so
// that cron mails only about trouble).
void say(const Common& c, const std::string& text) {
  if (c.verbose && !c.quiet) std::cerr << "dlock: " << text << '\n';
}

// An error of the library, `what` it was doing, and what to do about it in
// the terms of the store `url` names. Secrets and long names are cut from
// the library's text (it may quote both).
int fail(const dlock::Status& s, const std::string& what, const std::string& url, std::string_view name = {}) {
  std::cerr << "dlock: " << dlock::cli::tidy(what + ": " + s.to_string(), name) << '\n';
  std::cerr << "dlock: " << dlock::cli::advice(s, url) << '\n';
  return dlock::cli::exit_code_for(s.code());
}

// The library's own diagnostics (reconnects, renewal trouble) matter while
// CMD runs; before that, the tool reports failures itself, once.
std::atomic<bool> library_logs{false};

std::optional<dlock::Client> connect(const Common& c, int& exit_code, std::string_view name = {}) {
  dlock::ClientOptions options;
  options.logger = [quiet = c.quiet, name = std::string(name)](dlock::LogLevel level, std::string_view msg) {
    if (quiet || !library_logs.load() || level == dlock::LogLevel::debug || level == dlock::LogLevel::info) return;
    std::cerr << "dlock: " << dlock::cli::tidy(msg, name) << '\n';
  };
  auto client = dlock::Client::try_connect(c.url, options);
  if (!client.ok()) {
    exit_code = fail(client.status(), "cannot connect to " + dlock::describe_url(c.url), c.url);
    return std::nullopt;
  }
  return std::move(client.value());
}

// Connecting to a SQL store makes the lock table if it is missing and
// checks its version: that is the whole migration.
int cmd_migrate(const Common& common) {
  int code = 0;
  auto client = connect(common, code);
  if (!client) return code;
  if (!common.quiet) std::cout << "the lock table at " << dlock::describe_url(common.url) << " is ready\n";
  return 0;
}

// A SQLite URL whose file does not exist: nothing can be held there, and
// connecting would create it (a read should not write).
bool sqlite_store_missing(const std::string& url) {
  if (dlock::cli::store_of(url) != dlock::cli::Store::sqlite) return false;
  const std::string path = url.substr(std::string_view("sqlite://").size(), url.find('?') - 9);
  struct stat st {};
  // Only a well-formed URL (absolute path): the library reports bad ones.
  return path.starts_with('/') && stat(path.c_str(), &st) != 0 && errno == ENOENT;
}

nlohmann::json as_json(const std::string& name, const dlock::LockInfo& info) {
  return {{"name", name},
          {"held", info.held},
          {"fence", info.fence},
          {"last_fence", info.last_fence},
          {"remaining_ms", info.remaining.count()},
          {"reentry_count", info.reentry_count},
          {"waiters", info.waiters ? nlohmann::json(*info.waiters) : nlohmann::json()},
          {"holder", info.holder},
          {"held_for_ms", info.held_for ? nlohmann::json(info.held_for->count()) : nlohmann::json()},
          {"holders", info.holders},
          {"shared", info.shared}};
}

// "NAME: held by H for 12 s, fence 2, lease 28.5 s left": a held lock, for
// status and list. Shared and counted locks: how many hold it, and the
// oldest grant speaks for them.
std::string held_text(const std::string& name, const dlock::LockInfo& info) {
  std::ostringstream out;
  out << shown_name(name) << ": held";
  if (info.shared)
    out << " shared by " << info.holders << (info.holder.empty() ? "" : ", the first");
  else if (info.holders > 1)
    out << " by " << info.holders << (info.holder.empty() ? "" : ", the first");
  if (!info.holder.empty() || info.held_for) out << " by " << dlock::cli::holder_text(info);
  out << ", fence " << info.fence << ", ";
  if (info.remaining.count() > 0)
    out << "lease " << static_cast<double>(info.remaining.count()) / 1000.0 << " s left";
  else
    out << "kept by its holder's session";  // ZooKeeper: no lease
  return out.str();
}

// dlock list: the held locks under a prefix, one line (or JSON object) each.
int cmd_list(const Common& common, const std::string& prefix) {
  if (sqlite_store_missing(common.url)) {
    std::cout << (common.json ? "[]\n" : "");
    return 0;
  }
  int code = 0;
  auto client = connect(common, code);
  if (!client) return code;
  auto locks = client->list(prefix);
  if (!locks.ok()) return fail(locks.status(), "cannot list the locks", common.url);
  if (common.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& l : *locks) all.push_back(as_json(l.name, l.info));
    std::cout << all.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    return 0;
  }
  for (const auto& l : *locks)
    std::cout << held_text(l.name, l.info)
              << (l.info.waiters ? ", " + std::to_string(*l.info.waiters) + " waiting" : std::string()) << '\n';
  return 0;
}

void print_status(const Common& common, const std::string& name, const dlock::Result<dlock::LockInfo>& info,
                  bool no_store) {
  const std::string waiters =
      info->waiters ? std::to_string(*info->waiters) + " waiting" : std::string("waiters unknown");
  if (common.json) {
    // Names and holder texts are bytes: anything not UTF-8 is replaced.
    std::cout << as_json(name, *info).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  } else if (info->held) {
    std::cout << held_text(name, *info) << ", re-entry count " << info->reentry_count << ", " << waiters << '\n';
  } else if (no_store) {
    std::cout << shown_name(name) << ": free (no lock file at " << dlock::describe_url(common.url) << " yet)\n";
  } else {
    std::cout << shown_name(name) << ": free (fence counter at " << info->last_fence << "), " << waiters << '\n';
  }
}

// dlock status NAME...: one line (or JSON object) per name, or with
// --prometheus the gauges of every name in one exposition (for the node
// exporter's textfile collector).
int cmd_status(const Common& common, const std::vector<std::string>& names, bool prometheus) {
  // `dlock status NAME URL`: a URL among the names is a mistake, and would
  // be printed back, password and all.
  for (const std::string& name : names)
    if (name.find("://") != std::string::npos) {
      std::cerr << "dlock: '" << dlock::cli::redact_urls(name, {name})
                << "' looks like a URL, not a lock name: give it as --url URL (see dlock status --help)\n";
      return dlock::cli::kUsage;
    }
  std::vector<dlock::InspectedLock> seen;
  std::optional<dlock::Client> client;
  const bool no_store = sqlite_store_missing(common.url);
  for (const std::string& name : names) {
    dlock::Result<dlock::LockInfo> info = dlock::LockInfo{};
    if (!no_store) {
      int code = 0;
      if (!client) client = connect(common, code, name);
      if (!client) return code;
      info = client->inspect(name);
      if (!info.ok()) return fail(info.status(), "cannot read the state of '" + name + "'", common.url, name);
    }
    if (prometheus)
      seen.push_back({name, *info});
    else
      print_status(common, name, *info, no_store);
  }
  if (prometheus) {
    try {
      std::cout << dlock::locks_to_prometheus(seen);
    } catch (const dlock::Error& e) {  // a name given twice
      std::cerr << "dlock: " << dlock::cli::tidy(e.status().to_string()) << '\n';
      return dlock::cli::kUsage;
    }
  }
  return 0;
}

struct RunOptions {
  std::string name;
  std::vector<std::string> command;
  // The library's watchdog lease: one default, kept in LockOptions.
  std::string ttl = std::to_string(dlock::LockOptions{}.watchdog_lease.count()) + "ms";
  std::string wait;  // empty: forever
  std::string grace = "10s";
  bool ttl_given = false;  // --ttl on the command line
  // dlock run: the kind of lock. Default: exclusive (the write side of a
  // name that others hold --shared).
  bool fair = false;     // wait in line (LockOptions::fair)
  bool shared = false;   // a read lock (SharedMutex::lock_shared)
  std::string permits;   // --permits N: one permit of a Semaphore of N
  bool counted = false;  // --permits given
  // dlock elect: the candidate id (empty: hostname:pid).
  bool elect = false;
  std::string id;
  std::string label;  // dlock run --label: what status shows for CMD
};

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

// Connects in the background so that a signal ends the wait at once.
std::optional<dlock::Client> connect_interruptibly(const Common& c, const std::string& name, int sig_fd,
                                                   int& exit_code) {
  auto result = std::make_shared<Handoff<int>>();
  auto client = std::make_shared<std::optional<dlock::Client>>();
  if (result->fd < 0) {
    std::cerr << "dlock: eventfd failed: " << std::strerror(errno) << '\n';
    exit_code = dlock::cli::kSoftware;
    return std::nullopt;
  }
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

// Acquires NAME, waiting up to `wait`; a signal ends the wait (the Client's
// shutdown then undoes whatever the acquire may have been granted, and a
// place in a line is left at once).
std::optional<dlock::Lease> acquire_interruptibly(const Common& common, const dlock::Client& client,
                                                  const RunOptions& o, milliseconds wait, const dlock::LockOptions& lo,
                                                  int sig_fd, int& exit_code) {
  auto result = std::make_shared<Handoff<dlock::Result<dlock::Lease>>>();
  if (result->fd < 0) {
    std::cerr << "dlock: eventfd failed: " << std::strerror(errno) << '\n';
    exit_code = dlock::cli::kSoftware;
    return std::nullopt;
  }
  client.async_acquire(o.name, wait, lo, [result](dlock::Result<dlock::Lease> r) { result->set(std::move(r)); });
  dlock::cli::WaitStatus status(client, o.name, waited_for(o), isatty(STDERR_FILENO) != 0,
                                common.quiet || wait.count() == 0);
  const int sig = wait_or_signal(sig_fd, result->fd, [&status] { status.tick(); });
  status.finish();
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
  auto result = std::make_shared<Handoff<dlock::Status>>();
  if (result->fd < 0) {
    std::cerr << "dlock: eventfd failed: " << std::strerror(errno) << '\n';
    exit_code = dlock::cli::kSoftware;
    return std::nullopt;
  }
  std::thread taking([take = std::move(take), result] {
    try {
      result->set(take() ? dlock::Status() : dlock::Status(dlock::Errc::timeout, "not granted"));
    } catch (const dlock::Error& e) {
      result->set(e.status());
    } catch (const std::exception& e) {
      result->set(dlock::Status(dlock::Errc::server_error, e.what()));
    }
  });
  dlock::cli::WaitStatus status(client, o.name, waited_for(o), isatty(STDERR_FILENO) != 0,
                                common.quiet || wait.count() == 0);
  const int sig = wait_or_signal(sig_fd, result->fd, [&status] { status.tick(); });
  status.finish();
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
      held.release = [sem] {
        sem->release();
        return sem->last_release_status();
      };
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

// dlock run and dlock elect: holds what `o` asks for while CMD runs.
int cmd_run(const Common& common, const RunOptions& o) {
  const milliseconds ttl = *parse_duration(o.ttl);
  const milliseconds grace = *parse_duration(o.grace);
  const milliseconds wait = o.wait.empty() ? dlock::kForever : dlock::to_wait(*parse_duration(o.wait));
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
  if (o.shared && o.counted) {
    std::cerr << "dlock: --shared and --permits do not go together: --shared takes a read lock (readers overlap, "
                 "a plain run excludes them), --permits N one of N permits\n";
    return dlock::cli::kUsage;
  }
  const bool counted = o.counted;
  if (counted && !parse_permits(o.permits)) {
    std::cerr << "dlock: --permits takes a whole number from 1 to " << dlock::kMaxPermits << ", not '" << o.permits
              << "'\n";
    return dlock::cli::kUsage;
  }
  const std::string id = o.elect && o.id.empty() ? default_candidate_id() : o.id;
  if (o.elect && id.size() > dlock::kMaxHolderInfo) {
    std::cerr << "dlock: --id must be at most " << dlock::kMaxHolderInfo << " bytes\n";
    return dlock::cli::kUsage;
  }
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
  auto held = hold_interruptibly(common, *client, o, wait, lo, sig_fd, code);
  if (!held) return code;
  if (o.elect)
    say(common, "leading '" + shown_name(o.name) + "' as '" + dlock::cli::shown_holder(id) + "' (term " +
                    std::to_string(held->fence) + ")");
  else
    say(common, "acquired '" + shown_name(o.name) + "' (" +
                    (o.shared  ? std::string("shared, ")
                     : counted ? "one of " + o.permits + " permits, "
                               : std::string()) +
                    "fence " + std::to_string(held->fence) + ")");
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

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists: every thread inherits the blocked set, so the
  // signals reach only the signalfd of `dlock run`.
  sigset_t sigs = dlock::cli::handled_signals();
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  CLI::App app{"dlock: distributed locks from the shell (Redis, Redlock, PostgreSQL, ZooKeeper, SQLite).", "dlock"};
  app.require_subcommand(1);
  app.footer(kExitCodesHelp);
  Common common;
  const char* env_url = std::getenv("DLOCK_URL");
  const bool url_from_env = env_url != nullptr && *env_url != '\0';
  common.url = url_from_env ? env_url : dlock::cli::default_url();
  auto add_common = [&](CLI::App* sub) {  // also before the subcommand: dlock --url URL run ...
    sub->add_option(
        "--url", common.url,
        "Lock store URL: redis://HOST:PORT, redlock://H1,H2,H3, postgres://HOST/DB, zk://H1,H2,H3[/CHROOT], "
        "sqlite:///PATH (default: $DLOCK_URL, "
        "else " +
            dlock::cli::default_url() +
            ": locks shared by this user's processes on this machine only; name a server to lock "
            "across machines)");
    sub->add_flag("-q,--quiet", common.quiet, "Print only errors (no warnings, no status line while waiting)");
    sub->add_flag("-v,--verbose", common.verbose,
                  "Also say what went well (acquired, released); by default dlock prints only errors, warnings "
                  "and, while it waits, what it waits for");
    sub->footer(kExitCodesHelp);
  };

  add_common(&app);
  app.set_version_flag("--version", std::string("dlock ") + std::string(dlock::version()),
                       "Print the version (the library's, dlock::version()) and exit");

  RunOptions run;
  auto* run_cmd = app.add_subcommand(
      "run",
      "Run CMD while holding the lock NAME; exit with CMD's status. CMD gets DLOCK_NAME and DLOCK_FENCE in its "
      "environment and runs in its own process group: SIGINT, SIGTERM, SIGHUP and SIGQUIT to dlock are passed to "
      "that group, and if the lock is lost the group gets SIGTERM, then SIGKILL after --grace. The same signals "
      "while dlock is still connecting or waiting end it (128+N) without running CMD. CMD inherits no connection "
      "to the lock server. When stdin is a terminal and dlock its foreground job, CMD gets the terminal (it can "
      "read it, and Ctrl-C goes to CMD). dlock itself never stops, since a stopped dlock cannot renew the lease: "
      "Ctrl-Z, or "
      "SIGTSTP/SIGTTIN/SIGTTOU to dlock, stops CMD's group while dlock keeps the lock (and takes the terminal "
      "back, so Ctrl-C then ends CMD); SIGCONT to dlock resumes CMD. Stop signals while waiting are ignored.");
  add_common(run_cmd);
  run_cmd
      ->add_option("--ttl", run.ttl,
                   "Lease, renewed every ttl/3 while CMD runs (default " +
                       std::to_string(dlock::LockOptions{}.watchdog_lease.count() / 1000) +
                       "s, LockOptions::watchdog_lease; " + std::to_string(dlock::kMinWatchdogLease.count()) +
                       "ms to 1 year; not for zk://, where the session timeout is the lease)")
      ->check(DurationValidator());
  run_cmd
      ->add_option("--wait", run.wait,
                   "How long to wait for the lock (default: forever; 0: try once; 100 years or more: forever)")
      ->check(DurationValidator());
  run_cmd->add_option("--grace", run.grace, "After losing the lock: SIGTERM, then SIGKILL after this (default 10s)")
      ->check(DurationValidator());
  run_cmd->add_flag("--fair", run.fair,
                    "Wait in line: the lock goes to waiters in arrival order, across machines (not for redlock://)");
  run_cmd->add_flag("--shared", run.shared,
                    "Take a read lock: --shared runs of NAME overlap, a plain run of NAME excludes them (and waits "
                    "for them; --fair waits in their line)");
  run_cmd->add_option("--permits", run.permits,
                      "Take one of N permits (1 to 2147483647): at most N runs of NAME at once (every run of NAME "
                      "must give the same N)");
  run_cmd->add_option("--label", run.label,
                      "What dlock status and list show as the holder's program (default: CMD's name); shown as "
                      "LABEL[PID]@HOST, so not a secret");
  run_cmd->add_option("name", run.name, "Lock name")->required();
  run_cmd->add_option("command", run.command, "Command and arguments, after --")->required();

  RunOptions elect;
  elect.elect = true;
  auto* elect_cmd = app.add_subcommand(
      "elect",
      "Campaign to lead NAME (candidates wait in line), run CMD while leading, and resign when CMD ends; exit with "
      "CMD's status. CMD gets DLOCK_NAME, DLOCK_ID (the candidate id), and DLOCK_TERM (the term, also as "
      "DLOCK_FENCE: it grows from leader to leader, so a resource can refuse a deposed leader's writes). "
      "Signals, terminal and a lost leadership as for dlock run: CMD gets SIGTERM, then SIGKILL after --grace, "
      "and dlock exits 79.");
  add_common(elect_cmd);
  elect_cmd->add_option("--id", elect.id,
                        "Candidate id that dlock status shows for the leader (default: HOSTNAME:PID; at most " +
                            std::to_string(dlock::kMaxHolderInfo) + " bytes; not a secret)");
  elect_cmd->add_option("--ttl", elect.ttl, "Lease of the leadership, renewed every ttl/3 (as for dlock run)")
      ->check(DurationValidator());
  elect_cmd->add_option("--wait", elect.wait, "How long to wait to lead (default: forever; 0: try once)")
      ->check(DurationValidator());
  elect_cmd
      ->add_option("--grace", elect.grace,
                   "After losing the leadership: SIGTERM, then SIGKILL after this (default 10s)")
      ->check(DurationValidator());
  elect_cmd->add_option("name", elect.name, "Election name (a lock name)")->required();
  elect_cmd->add_option("command", elect.command, "Command and arguments, after --")->required();

  std::vector<std::string> status_names;
  bool status_prometheus = false;
  auto* status_cmd = app.add_subcommand(
      "status",
      "Show whether NAME is held, by whom (PROGRAM[PID]@HOST of the run that holds it, or the leader's id) and for "
      "how long, its fence, lease and waiters; for shared and counted locks also how many hold it");
  add_common(status_cmd);
  status_cmd->add_flag("--json", common.json, "One JSON object on stdout");
  status_cmd->add_flag("--prometheus", status_prometheus,
                       "The locks' gauges (held, fence, lease left, holders, waiters) in the Prometheus text format, "
                       "for the node exporter's textfile collector");
  status_cmd->add_option("name", status_names, "Lock names")->required();

  std::string list_prefix;
  auto* list_cmd = app.add_subcommand(
      "list",
      "List the locks held now whose names start with PREFIX (default: all): holder, fence, time held, "
      "lease left and waiters (Redis: SCAN of the key space; SQL: the lock table; ZooKeeper: the lock "
      "parent's children)");
  add_common(list_cmd);
  list_cmd->add_flag("--json", common.json, "One JSON array on stdout");
  list_cmd->add_option("prefix", list_prefix, "Name prefix");

  std::string tx_action, tx_gid;
  auto* tx_cmd = app.add_subcommand(
      "tx",
      "Distributed transactions (<dlock/tx.hpp>) in the log at --url: 'list' the unfinished ones, 'show GID' "
      "(state, reason, each branch's progress and last error), 'retry GID' (due for the next recover() now)");
  add_common(tx_cmd);
  tx_cmd->add_flag("--json", common.json, "JSON on stdout");
  tx_cmd->add_option("action", tx_action, "list, show or retry")
      ->required()
      ->check(CLI::IsMember({"list", "show", "retry"}));
  tx_cmd->add_option("gid", tx_gid, "Transaction id (show, retry)");

  auto* migrate_cmd = app.add_subcommand(
      "migrate",
      "Create the lock table in a SQL store (postgres://, sqlite://) if missing and check its version, then exit; "
      "for deployments whose application role may not create tables (other stores need nothing)");
  add_common(migrate_cmd);
  std::string migrate_url;
  migrate_cmd->add_option("url", migrate_url, "Lock store URL (as --url)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 quotes raw arguments, URLs with their passwords among them, and
    // reports an unknown option as the arguments left over after it.
    const std::string unknown =
        unknown_option(argc, argv, {&app, run_cmd, elect_cmd, status_cmd, list_cmd, migrate_cmd, tx_cmd});
    std::cerr << "dlock: "
              << (unknown.empty() ? dlock::cli::redact_urls(e.what(), url_arguments(argc, argv))
                                  : "unknown option '" + unknown + "'")
              << " (see dlock " << (run_cmd->parsed() ? "run " : "") << (elect_cmd->parsed() ? "elect " : "")
              << (status_cmd->parsed() ? "status " : "") << (list_cmd->parsed() ? "list " : "")
              << (migrate_cmd->parsed() ? "migrate " : "") << (tx_cmd->parsed() ? "tx " : "") << "--help)\n";
    return dlock::cli::kUsage;
  }
  // Only `dlock run` and `dlock elect` read them from a signalfd; the others keep
  // the default actions (Ctrl-C ends a status that waits for a server).
  // Still before any thread exists.
  if (!run_cmd->parsed() && !elect_cmd->parsed()) pthread_sigmask(SIG_UNBLOCK, &sigs, nullptr);
  if (!migrate_url.empty()) common.url = migrate_url;
  run.ttl_given = run_cmd->count("--ttl") > 0;
  elect.ttl_given = elect_cmd->count("--ttl") > 0;
  run.counted = run_cmd->count("--permits") > 0;
  // Only commands that write make the default file's directory: status and
  // list read (a build without SQLite has no default store: all say so).
  const bool reads_only = status_cmd->parsed() || list_cmd->parsed();
  if (common.url == dlock::cli::default_url() && (!reads_only || !DLOCK_WITH_SQLITE))
    if (std::string err = dlock::cli::prepare_default_dir(); !err.empty()) {
      std::cerr << "dlock: " << err << '\n';
      return dlock::cli::kCantCreate;
    }
  try {
    if (run_cmd->parsed()) return cmd_run(common, run);
    if (elect_cmd->parsed()) return cmd_run(common, elect);
    if (migrate_cmd->parsed()) return cmd_migrate(common);
    if (list_cmd->parsed()) return cmd_list(common, list_prefix);
    if (tx_cmd->parsed()) {
#if DLOCK_CLI_WITH_TX
      return dlock::cli::run_tx_command({common.url, tx_action, tx_gid, common.json}, std::cout, std::cerr);
#else
      std::cerr << "dlock: this build has no transactions (it was built without DLOCK_WITH_TX)\n";
      return dlock::cli::kUsage;
#endif
    }
    return cmd_status(common, status_names, status_prometheus);
  } catch (const std::exception& e) {
    std::cerr << "dlock: " << e.what() << '\n';
    return dlock::cli::kSoftware;
  }
}

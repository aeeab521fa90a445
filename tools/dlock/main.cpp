// dlock: the command-line tool.
//
//   dlock run [options] NAME -- CMD [ARGS...]   run CMD while holding NAME
//                                                (--fair, --shared, --permits N)
//   dlock elect [options] NAME -- CMD [ARGS...] run CMD while leading NAME
//   dlock status [options] NAME                  show NAME's state
//   dlock migrate [options] [URL]                make a SQL store's lock table
//
// Uses only the public API.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <dlock/dlock.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "default_url.hpp"
#include "exit_codes.hpp"
#include "hints.hpp"
#include "job_control.hpp"
#include "lock_command.hpp"
#include "messages.hpp"
#include "store_commands.hpp"
#if DLOCK_CLI_WITH_TX
#include "tx_command.hpp"
#endif

namespace {

using dlock::cli::Common;
using dlock::cli::parse_duration;
using dlock::cli::RunOptions;

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

// What the command line asked for.
struct Args {
  Common common;
  RunOptions run, elect;
  std::vector<std::string> status_names;
  bool status_prometheus = false;
  std::string list_prefix, tx_action, tx_gid, migrate_url;
};

struct Subcommands {
  CLI::App *run, *elect, *status, *list, *tx, *migrate;
};

// The options every subcommand takes (also before it: dlock --url URL run).
void add_common(CLI::App* sub, Common& common) {
  sub->add_option("--url", common.url,
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
}

CLI::App* add_run(CLI::App& app, Args& a) {
  RunOptions& run = a.run;
  auto* cmd = app.add_subcommand(
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
  add_common(cmd, a.common);
  cmd->add_option("--ttl", run.ttl,
                  "Lease, renewed every ttl/3 while CMD runs (default " +
                      std::to_string(dlock::LockOptions{}.watchdog_lease.count() / 1000) +
                      "s, LockOptions::watchdog_lease; " + std::to_string(dlock::kMinWatchdogLease.count()) +
                      "ms to 1 year; not for zk://, where the session timeout is the lease)")
      ->check(DurationValidator());
  cmd->add_option("--wait", run.wait,
                  "How long to wait for the lock (default: forever; 0: try once; 100 years or more: forever)")
      ->check(DurationValidator());
  cmd->add_option("--grace", run.grace, "After losing the lock: SIGTERM, then SIGKILL after this (default 10s)")
      ->check(DurationValidator());
  cmd->add_flag("--fair", run.fair,
                "Wait in line: the lock goes to waiters in arrival order, across machines (not for redlock://)");
  cmd->add_flag("--shared", run.shared,
                "Take a read lock: --shared runs of NAME overlap, a plain run of NAME excludes them (and waits "
                "for them; --fair waits in their line)");
  cmd->add_option("--permits", run.permits,
                  "Take one of N permits (1 to 2147483647): at most N runs of NAME at once (every run of NAME "
                  "must give the same N)");
  cmd->add_option("--label", run.label,
                  "What dlock status and list show as the holder's program (default: CMD's name); shown as "
                  "LABEL[PID]@HOST, so not a secret");
  cmd->add_option("name", run.name, "Lock name")->required();
  cmd->add_option("command", run.command, "Command and arguments, after --")->required();
  return cmd;
}

CLI::App* add_elect(CLI::App& app, Args& a) {
  RunOptions& elect = a.elect;
  elect.elect = true;
  auto* cmd = app.add_subcommand(
      "elect",
      "Campaign to lead NAME (candidates wait in line), run CMD while leading, and resign when CMD ends; exit with "
      "CMD's status. CMD gets DLOCK_NAME, DLOCK_ID (the candidate id), and DLOCK_TERM (the term, also as "
      "DLOCK_FENCE: it grows from leader to leader, so a resource can refuse a deposed leader's writes). "
      "Signals, terminal and a lost leadership as for dlock run: CMD gets SIGTERM, then SIGKILL after --grace, "
      "and dlock exits 79.");
  add_common(cmd, a.common);
  cmd->add_option("--id", elect.id,
                  "Candidate id that dlock status shows for the leader (default: HOSTNAME:PID; at most " +
                      std::to_string(dlock::kMaxHolderInfo) + " bytes; not a secret)");
  cmd->add_option("--ttl", elect.ttl, "Lease of the leadership, renewed every ttl/3 (as for dlock run)")
      ->check(DurationValidator());
  cmd->add_option("--wait", elect.wait, "How long to wait to lead (default: forever; 0: try once)")
      ->check(DurationValidator());
  cmd->add_option("--grace", elect.grace, "After losing the leadership: SIGTERM, then SIGKILL after this (default 10s)")
      ->check(DurationValidator());
  cmd->add_option("name", elect.name, "Election name (a lock name)")->required();
  cmd->add_option("command", elect.command, "Command and arguments, after --")->required();
  return cmd;
}

CLI::App* add_status(CLI::App& app, Args& a) {
  auto* cmd = app.add_subcommand(
      "status",
      "Show whether NAME is held, by whom (PROGRAM[PID]@HOST of the run that holds it, or the leader's id) and for "
      "how long, its fence, lease and waiters; for shared and counted locks also how many hold it");
  add_common(cmd, a.common);
  cmd->add_flag("--json", a.common.json, "One JSON object on stdout");
  cmd->add_flag("--prometheus", a.status_prometheus,
                "The locks' gauges (held, fence, lease left, holders, waiters) in the Prometheus text format, "
                "for the node exporter's textfile collector");
  cmd->add_option("name", a.status_names, "Lock names")->required();
  return cmd;
}

CLI::App* add_list(CLI::App& app, Args& a) {
  auto* cmd = app.add_subcommand(
      "list",
      "List the locks held now whose names start with PREFIX (default: all): holder, fence, time held, "
      "lease left and waiters (Redis: SCAN of the key space; SQL: the lock table; ZooKeeper: the lock "
      "parent's children)");
  add_common(cmd, a.common);
  cmd->add_flag("--json", a.common.json, "One JSON array on stdout");
  cmd->add_option("prefix", a.list_prefix, "Name prefix");
  return cmd;
}

CLI::App* add_tx(CLI::App& app, Args& a) {
  auto* cmd = app.add_subcommand(
      "tx",
      "Distributed transactions (<dlock/tx.hpp>) in the log at --url: 'list' the unfinished ones, 'show GID' "
      "(state, reason, each branch's progress and last error), 'retry GID' (due for the next recover() now)");
  add_common(cmd, a.common);
  cmd->add_flag("--json", a.common.json, "JSON on stdout");
  cmd->add_option("action", a.tx_action, "list, show or retry")
      ->required()
      ->check(CLI::IsMember({"list", "show", "retry"}));
  cmd->add_option("gid", a.tx_gid, "Transaction id (show, retry)");
  return cmd;
}

CLI::App* add_migrate(CLI::App& app, Args& a) {
  auto* cmd = app.add_subcommand(
      "migrate",
      "Create the lock table in a SQL store (postgres://, sqlite://) if missing and check its version, then exit; "
      "for deployments whose application role may not create tables (other stores need nothing)");
  add_common(cmd, a.common);
  cmd->add_option("url", a.migrate_url, "Lock store URL (as --url)");
  return cmd;
}

// A bad command line, said without quoting what CLI11 would: raw arguments,
// URLs with their passwords among them; CLI11 also reports an unknown option
// as the arguments left over after it.
int usage_error(const CLI::ParseError& e, int argc, char** argv, CLI::App& app, const Subcommands& s) {
  const std::string unknown = unknown_option(argc, argv, {&app, s.run, s.elect, s.status, s.list, s.migrate, s.tx});
  std::cerr << "dlock: "
            << (unknown.empty() ? dlock::cli::redact_urls(e.what(), url_arguments(argc, argv))
                                : "unknown option '" + unknown + "'")
            << " (see dlock " << (s.run->parsed() ? "run " : "") << (s.elect->parsed() ? "elect " : "")
            << (s.status->parsed() ? "status " : "") << (s.list->parsed() ? "list " : "")
            << (s.migrate->parsed() ? "migrate " : "") << (s.tx->parsed() ? "tx " : "") << "--help)\n";
  return dlock::cli::kUsage;
}

int run_subcommand(const Args& a, const Subcommands& s) {
  if (s.run->parsed()) return dlock::cli::cmd_run(a.common, a.run);
  if (s.elect->parsed()) return dlock::cli::cmd_run(a.common, a.elect);
  if (s.migrate->parsed()) return dlock::cli::cmd_migrate(a.common);
  if (s.list->parsed()) return dlock::cli::cmd_list(a.common, a.list_prefix);
  if (s.tx->parsed()) {
#if DLOCK_CLI_WITH_TX
    return dlock::cli::run_tx_command({a.common.url, a.tx_action, a.tx_gid, a.common.json}, std::cout, std::cerr);
#else
    std::cerr << "dlock: this build has no transactions (it was built without DLOCK_WITH_TX)\n";
    return dlock::cli::kUsage;
#endif
  }
  return dlock::cli::cmd_status(a.common, a.status_names, a.status_prometheus);
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
  Args a;
  const char* env_url = std::getenv("DLOCK_URL");
  a.common.url = env_url != nullptr && *env_url != '\0' ? env_url : dlock::cli::default_url();
  add_common(&app, a.common);
  app.set_version_flag("--version", std::string("dlock ") + std::string(dlock::version()),
                       "Print the version (the library's, dlock::version()) and exit");
  const Subcommands s{add_run(app, a),  add_elect(app, a), add_status(app, a),
                      add_list(app, a), add_tx(app, a),    add_migrate(app, a)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(e, argc, argv, app, s);
  }
  // Only `dlock run` and `dlock elect` read them from a signalfd; the others keep
  // the default actions (Ctrl-C ends a status that waits for a server).
  // Still before any thread exists.
  if (!s.run->parsed() && !s.elect->parsed()) pthread_sigmask(SIG_UNBLOCK, &sigs, nullptr);
  if (!a.migrate_url.empty()) a.common.url = a.migrate_url;
  a.run.ttl_given = s.run->count("--ttl") > 0;
  a.elect.ttl_given = s.elect->count("--ttl") > 0;
  a.run.counted = s.run->count("--permits") > 0;
  // Only commands that write make the default file's directory: status and
  // list read (a build without SQLite has no default store: all say so).
  const bool reads_only = s.status->parsed() || s.list->parsed();
  if (a.common.url == dlock::cli::default_url() && (!reads_only || !DLOCK_WITH_SQLITE))
    if (std::string err = dlock::cli::prepare_default_dir(); !err.empty()) {
      std::cerr << "dlock: " << err << '\n';
      return dlock::cli::kCantCreate;
    }
  try {
    return run_subcommand(a, s);
  } catch (const std::exception& e) {
    std::cerr << "dlock: " << e.what() << '\n';
    return dlock::cli::kSoftware;
  }
}

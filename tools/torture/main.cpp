// dlock-torture: runs fault scenarios against lock strategies, records every
// operation, checks the history, and says what it found.
//
//   dlock-torture list
//   dlock-torture run --scenario pause --strategy dlock [--duration 10] [--seed 1]
//   dlock-torture suite --short|--full [--duration 8] [--seeds 1] [--out DIR]
//                       [--shard K/N] [--dry-run]
//
// Exit status: 0 when every run met its expectation (a safe strategy showed no
// violation its scenario does not document; every naive strategy that must
// fail was caught), 1 otherwise, 2 on a set-up error, 64 on bad usage.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <utility>

#include "run.hpp"
#include "scenarios.hpp"
#include "strategies.hpp"
#include "strategies_cli.hpp"
#include "worker.hpp"

#ifndef DLOCK_CLOCK_SHIM_BUILD_PATH
#define DLOCK_CLOCK_SHIM_BUILD_PATH ""
#endif

namespace fs = std::filesystem;
using namespace torture;

namespace {

std::string self_exe() { return fs::read_symlink("/proc/self/exe").string(); }

// The shim next to this program (bin/../lib), else where the build put it.
std::string default_shim() {
  const fs::path beside = fs::path(self_exe()).parent_path().parent_path() / "lib" / "libdlock_clock_shim.so";
  if (fs::exists(beside)) return beside.string();
  return DLOCK_CLOCK_SHIM_BUILD_PATH;
}

std::string one_line(const RunReport& r) {
  const auto& f = r.findings;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%-20s %-21s %5lld grants %3zu faults  overlaps %lld/%lld  stale %lld/%lld  lost %lld  %s",
                r.info.scenario.c_str(), r.info.strategy.c_str(), static_cast<long long>(f.grants), f.faults.size(),
                static_cast<long long>(f.unexplained_overlaps),
                static_cast<long long>(f.overlaps.size()) - static_cast<long long>(f.unexplained_overlaps),
                static_cast<long long>(f.stale_fenced), static_cast<long long>(f.stale_unfenced),
                static_cast<long long>(f.lost_updates),
                r.verdict.pass ? (r.expect.must_be_caught ? "CAUGHT as expected" : "as expected") : "UNEXPECTED");
  return buf;
}

// The internal subcommand each worker process runs.
CLI::App* add_worker_command(CLI::App& app, WorkerArgs& wa) {
  auto* worker = app.add_subcommand("worker", "(internal) one worker process");
  worker->group("");
  worker->add_option("--proc", wa.proc)->required();
  worker->add_option("--inc", wa.inc);
  worker->add_option("--slot", wa.slot);
  worker->add_option("--slots", wa.slots)->required();
  worker->add_option("--slot-count", wa.slot_count)->required();
  worker->add_option("--strategy", wa.strategy)->required();
  worker->add_option("--lock-ports", wa.lock_ports)->delimiter(',');
  worker->add_option("--lock-url", wa.lock_url);
  worker->add_option("--sqlite", wa.sqlite_path);
  worker->add_option("--user", wa.user);
  worker->add_option("--resource-port", wa.resource_port)->required();
  worker->add_option("--ttl", wa.ttl_ms);
  worker->add_option("--think", wa.think_ms);
  worker->add_option("--think-min", wa.think_min_ms);
  worker->add_option("--wait", wa.wait_ms);
  worker->add_option("--history", wa.history)->required();
  worker->add_option("--seed", wa.seed);
  worker->add_option("--failpoints", wa.failpoints);
  worker->add_option("--permits", wa.permits);
  return worker;
}

int print_list() {
  std::cout << "scenarios:\n";
  for (const auto& s : scenarios())
    std::cout << "  " << s.name << std::string(s.name.size() < 22 ? 22 - s.name.size() : 1, ' ') << s.summary << "\n";
  std::cout << "strategies:\n";
  for (const auto& s : strategy_names()) std::cout << "  " << s << (is_naive(s) ? "  (naive control)" : "") << "\n";
  return 0;
}

// The one run `run` asks for; an empty string when it can be done, else why not.
std::string check_single(const RunConfig& cfg) {
  if (!find_scenario(cfg.scenario)) return "unknown scenario '" + cfg.scenario + "' (see: dlock-torture list)";
  bool known = false;
  for (const auto& s : strategy_names()) known = known || s == cfg.strategy;
  if (!known) return "unknown strategy '" + cfg.strategy + "' (see: dlock-torture list)";
  if (!applies(*find_scenario(cfg.scenario), cfg.strategy))
    return "scenario '" + cfg.scenario + "' does not apply to strategy '" + cfg.strategy +
           "' (Redlock scenarios need redlock; failover needs one server)";
  return {};
}

struct SuiteFilter {
  bool full = false;
  std::vector<std::string> scenarios, strategies;
  // K and N: every Nth run from the Kth (0-based), so N processes share a suite.
  std::optional<std::pair<std::size_t, std::size_t>> shard;
};

// K and N of a "K/N" shard, or nullopt when it is not one (0 <= K < N).
std::optional<std::pair<std::size_t, std::size_t>> parse_shard(const std::string& s) {
  std::size_t k = 0, n = 0;
  const auto slash = s.find('/');
  if (slash == std::string::npos) return std::nullopt;
  const char* end = s.data() + s.size();
  auto [p1, e1] = std::from_chars(s.data(), s.data() + slash, k);
  auto [p2, e2] = std::from_chars(s.data() + slash + 1, end, n);
  if (e1 != std::errc() || e2 != std::errc() || p1 != s.data() + slash || p2 != end || n == 0 || k >= n)
    return std::nullopt;
  return std::make_pair(k, n);
}

std::vector<PlannedRun> plan_suite(const SuiteFilter& f) {
  std::vector<PlannedRun> plan = f.full ? full_suite() : short_suite();
  auto keep = [](const std::vector<std::string>& only, const std::string& v) {
    return only.empty() || std::find(only.begin(), only.end(), v) != only.end();
  };
  std::erase_if(plan,
                [&](const PlannedRun& p) { return !keep(f.scenarios, p.scenario) || !keep(f.strategies, p.strategy); });
  if (f.shard) {
    std::vector<PlannedRun> mine;
    for (std::size_t i = f.shard->first; i < plan.size(); i += f.shard->second) mine.push_back(plan[i]);
    plan = std::move(mine);
  }
  return plan;
}

// Runs the plan once per seed, printing as it goes. single: one run, shown
// in full; else one line per run and the suite's table and files at the end.
int execute(const RunConfig& cfg, const std::vector<PlannedRun>& plan, const std::vector<std::uint64_t>& seeds,
            const std::string& out, bool single) {
  std::vector<RunReport> reports;
  bool all_pass = true;
  try {
    for (const auto seed : seeds) {
      for (const auto& p : plan) {
        RunConfig rc = cfg;
        rc.scenario = p.scenario;
        rc.strategy = p.strategy;
        rc.seed = seed;
        rc.out_dir = (fs::path(out) / (p.scenario + "." + p.strategy + "." + std::to_string(seed))).string();
        RunReport r = run_one(rc);
        all_pass = all_pass && r.verdict.pass;
        if (single) {
          std::cout << render_text(r) << "\nrun directory: " << rc.out_dir << " (timeline.html)\n";
        } else {
          std::cout << one_line(r) << std::endl;
          for (const auto& why : r.verdict.problems) std::cout << "    " << why << "\n";
        }
        reports.push_back(std::move(r));
      }
    }
  } catch (const std::exception& ex) {
    std::cerr << "dlock-torture: " << ex.what() << "\n";
    return 2;
  }
  if (!single) {
    const std::string table = render_suite_text(reports);
    std::cout << "\n" << table;
    std::ofstream(fs::path(out) / "suite.txt") << table;
    std::ofstream(fs::path(out) / "suite.json") << render_suite_json(reports);
    std::cout << "reports: " << out << "/suite.txt, suite.json, <run>/timeline.html\n";
  }
  return all_pass ? 0 : 1;
}

// Everything the command line sets.
struct Options {
  RunConfig cfg;
  double duration_s = 10;
  std::string out = "torture-results";
  SuiteFilter filter;
  std::string shard;  // --shard K/N, as given
  bool dry_run = false;
  int seeds = 1;
  std::uint64_t first_seed = 1;
  WorkerArgs worker;
  std::uint16_t cmd_port = 0, cmd_resource_port = 0;  // cli-cmd
};

// The options `run` and `suite` share.
void add_common_options(CLI::App* sub, Options& o) {
  RunConfig& cfg = o.cfg;
  sub->add_option("--duration", o.duration_s, "Seconds of workload per run")->capture_default_str();
  sub->add_option("--workers", cfg.workers, "Worker processes")->capture_default_str()->check(CLI::Range(2, 8));
  sub->add_option("--ttl", cfg.ttl_ms, "Lease in ms")->capture_default_str()->check(CLI::Range(200, 60000));
  sub->add_option("--think", cfg.think_ms, "Max think time under the lock, ms")->capture_default_str();
  sub->add_option("--out", o.out, "Directory for run directories and reports")->capture_default_str();
  sub->add_option("--clock-shim", cfg.clock_shim, "Path of libdlock_clock_shim.so");
  sub->add_option("--redis-server", cfg.redis_server, "redis-server binary")->capture_default_str();
  sub->add_option("--permits", cfg.permits, "Permits of the semaphore strategies")
      ->capture_default_str()
      ->check(CLI::Range(1, 7));
}

CLI::App* add_run_command(CLI::App& app, Options& o) {
  auto* run = app.add_subcommand("run", "Run one scenario against one strategy");
  run->add_option("--scenario", o.cfg.scenario, "Scenario (see list)")->required();
  run->add_option("--strategy", o.cfg.strategy, "Strategy (see list)")->default_val("dlock");
  run->add_option("--seed", o.cfg.seed, "Seed")->capture_default_str();
  add_common_options(run, o);
  return run;
}

CLI::App* add_suite_command(CLI::App& app, Options& o) {
  auto* suite = app.add_subcommand("suite", "Run a plan of scenarios x strategies");
  suite->add_flag("--full", o.filter.full, "Every scenario on every strategy (default: the short suite)");
  suite->add_flag(
      "--short", [&o](std::int64_t) { o.filter.full = false; },
      "Each backend family's faults once, each naive strategy where it must be caught");
  suite->add_option("--seeds", o.seeds, "Repetitions with seeds first..first+K-1")->capture_default_str();
  suite->add_option("--first-seed", o.first_seed, "First seed")->capture_default_str();
  suite->add_option("--scenario", o.filter.scenarios, "Only these scenarios (repeatable)");
  suite->add_option("--strategy", o.filter.strategies, "Only these strategies (repeatable)");
  suite->add_option("--shard", o.shard, "K/N: only every Nth run of the plan, from the Kth (0-based)");
  suite->add_flag("--dry-run", o.dry_run, "Print the plan (scenario strategy, one run a line) and run nothing");
  add_common_options(suite, o);
  return suite;
}

// The CMD of strategy dlock-run, started by `dlock run`.
CLI::App* add_cli_cmd_command(CLI::App& app, Options& o) {
  auto* cli_cmd = app.add_subcommand("cli-cmd", "(internal) CMD of strategy dlock-run");
  cli_cmd->group("");
  cli_cmd->add_option("--port", o.cmd_port)->required();
  cli_cmd->add_option("--resource-port", o.cmd_resource_port)->required();
  return cli_cmd;
}

// What `run` and `suite` need beyond the options: this program, the clock
// shim (found, absolute) and the output directory. Returns an exit status,
// 0 when all is there.
int complete_config(Options& o) {
  RunConfig& cfg = o.cfg;
  cfg.duration_ms = static_cast<std::int64_t>(o.duration_s * 1000);
  cfg.self_exe = self_exe();
  if (cfg.clock_shim.empty()) cfg.clock_shim = default_shim();
  if (cfg.clock_shim.empty() || !fs::exists(cfg.clock_shim)) {
    std::cerr << "dlock-torture: clock shim not found; pass --clock-shim PATH\n";
    return 2;
  }
  cfg.clock_shim = fs::absolute(cfg.clock_shim).string();
  fs::create_directories(o.out);
  return 0;
}

int run_single(const Options& o) {
  const RunConfig& cfg = o.cfg;
  if (std::string why = check_single(cfg); !why.empty()) {
    std::cerr << "dlock-torture: " << why << "\n";
    return 64;
  }
  return execute(cfg, {{cfg.scenario, cfg.strategy}}, {cfg.seed}, o.out, true);
}

int run_suite(const Options& o) {
  SuiteFilter filter = o.filter;
  if (!o.shard.empty() && !(filter.shard = parse_shard(o.shard))) {
    std::cerr << "dlock-torture: --shard takes K/N with 0 <= K < N, not '" << o.shard << "'\n";
    return 64;
  }
  std::vector<PlannedRun> plan;
  try {
    plan = plan_suite(filter);
  } catch (const std::exception& ex) {  // a suite's table that names what is not there
    std::cerr << "dlock-torture: " << ex.what() << "\n";
    return 2;
  }
  if (o.dry_run) {
    for (const auto& p : plan) std::cout << p.scenario << " " << p.strategy << "\n";
    std::cout << plan.size() << " runs" << (o.seeds > 1 ? " per seed, " + std::to_string(o.seeds) + " seeds" : "")
              << "\n";
    return 0;
  }
  std::vector<std::uint64_t> seed_list;
  for (int i = 0; i < o.seeds; ++i) seed_list.push_back(o.first_seed + static_cast<std::uint64_t>(i));
  return execute(o.cfg, plan, seed_list, o.out, false);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dlock-torture: fault injection and history checks for distributed locks"};
  app.require_subcommand(1);
  Options o;
  auto* list = app.add_subcommand("list", "List scenarios and strategies");
  auto* run = add_run_command(app, o);
  add_suite_command(app, o);
  auto* worker = add_worker_command(app, o.worker);
  auto* cli_cmd = add_cli_cmd_command(app, o);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 64;
  }
  if (*worker) return worker_main(o.worker);
  if (*cli_cmd) return cli_cmd_main(o.cmd_port, o.cmd_resource_port);
  if (*list) return print_list();
  if (!*run && o.dry_run) return run_suite(o);
  if (const int rc = complete_config(o); rc != 0) return rc;
  return *run ? run_single(o) : run_suite(o);
}

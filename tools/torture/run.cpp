#include "run.hpp"

#include <signal.h>
#include <unistd.h>

#include <dlock/version.hpp>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "run_ctx.hpp"
#include "scenarios.hpp"

namespace torture {
namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

void heal_everything(RunCtx& c) {
  c.proxy().set_delay("", std::chrono::milliseconds(0));
  c.proxy().hold_replies("", std::chrono::milliseconds(0));
  c.proxy().blackhole("", false);
  c.proxy().drop_replies("", false);
  c.proxy().refuse("", false);
  for (auto& p : c.procs) {
    p.clock->set_offset(std::chrono::milliseconds(0));
    if (p.pid > 0) ::kill(p.pid, SIGCONT);
    p.paused_by_nemesis = false;
    p.resume_at = 0;
  }
}

}  // namespace

RunReport run_one(const RunConfig& cfg) {
  const Scenario* scenario = find_scenario(cfg.scenario);
  if (!scenario) throw std::runtime_error("unknown scenario '" + cfg.scenario + "'");
  const fs::path dir(cfg.out_dir);
  fs::remove_all(dir);
  fs::create_directories(dir / "history");
  fs::create_directories(dir / "lock-server");
  fs::create_directories(dir / "resource-server");

  RunCtx c;
  c.ttl = cfg.ttl_ms;
  c.rng.seed(cfg.seed);
  c.self_exe = cfg.self_exe;
  c.clock_shim = cfg.clock_shim;
  c.log = std::make_unique<HistoryWriter>((dir / "history" / "verifier.jsonl").string());
  c.server_clk = std::make_unique<ClockControl>((dir / "clock-server").string());

  ServerSpec lock_spec;
  lock_spec.binary = cfg.redis_server;
  lock_spec.dir = fs::absolute(dir / "lock-server").string();
  lock_spec.aof_always = scenario->aof_always;
  lock_spec.clock_shim = cfg.clock_shim;
  lock_spec.clock_file = c.server_clk->path();
  c.lock = std::make_unique<ServerProc>(lock_spec);
  c.lock->start();
  ServerSpec res_spec;
  res_spec.binary = cfg.redis_server;
  res_spec.dir = fs::absolute(dir / "resource-server").string();
  ServerProc resource(res_spec);
  resource.start();
  c.admin_conn = std::make_unique<SyncConn>("127.0.0.1", c.lock->port(), std::chrono::milliseconds(2000));
  SyncConn res_conn("127.0.0.1", resource.port(), std::chrono::milliseconds(2000));

  c.proxy_ = std::make_unique<Proxy>("127.0.0.1", c.lock->port());
  const std::string slots_path = fs::absolute(dir / "slots").string();
  c.slots = std::make_unique<SlotTable>(slots_path, cfg.workers, true);
  for (int w = 0; w < cfg.workers; ++w) {
    WorkerProc p;
    p.args.proc = "w" + std::to_string(w);
    p.args.slot = w;
    p.args.slots = slots_path;
    p.args.slot_count = cfg.workers;
    p.args.strategy = cfg.strategy;
    p.args.lock_port = c.proxy_->add_link(p.args.proc);
    p.args.resource_port = resource.port();
    p.args.ttl_ms = cfg.ttl_ms;
    p.args.think_ms = cfg.think_ms;
    p.args.wait_ms = 3 * cfg.ttl_ms;
    p.args.history = fs::absolute(dir / "history" / (p.args.proc + ".jsonl")).string();
    p.args.seed = cfg.seed * 100 + static_cast<std::uint64_t>(w);
    p.args.failpoints = scenario->failpoints;
    p.clock = std::make_unique<ClockControl>(fs::absolute(dir / ("clock-" + p.args.proc)).string());
    c.procs.push_back(std::move(p));
  }
  if (scenario->replica) {
    // The replica replicates through the proxy, so the nemesis can cut it off.
    ServerSpec rs;
    rs.binary = cfg.redis_server;
    rs.dir = fs::absolute(dir / "replica-server").string();
    fs::create_directories(rs.dir);
    rs.extra_args = {"--replicaof", "127.0.0.1", std::to_string(c.proxy_->add_link("replication"))};
    c.replica = std::make_unique<ServerProc>(rs);
  }
  c.proxy_->start();
  if (c.replica) {
    c.replica->start();
    SyncConn probe("127.0.0.1", c.replica->port(), std::chrono::milliseconds(500));
    for (int i = 0; i < 500; ++i) {
      auto info = probe.cmd({"INFO", "replication"});
      if (info.str.find("master_link_status:up") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  const auto run_start = mono_ns();
  c.end_t = run_start + cfg.duration_ms * 1'000'000;
  for (int w = 0; w < cfg.workers; ++w) c.spawn(w);
  scenario->nemesis(c);
  heal_everything(c);
  c.stop_workers();

  Event fin;
  fin.t = mono_ns();
  fin.proc = "verifier";
  fin.op = "final";
  fin.kind = "counter";
  auto counter = res_conn.cmd({"GET", "counter"});
  fin.value = counter.good() && !counter.is_nil ? std::stoll(counter.str) : 0;
  c.log->write(fin);
  const auto run_end = mono_ns();
  c.proxy_.reset();
  c.lock->stop();
  if (c.replica) c.replica->stop();
  resource.stop();

  RunReport r;
  r.info.scenario = cfg.scenario;
  r.info.strategy = cfg.strategy;
  r.info.ttl_ms = cfg.ttl_ms;
  r.info.recovery_slack_ms = std::max<std::int64_t>(250, cfg.ttl_ms / 4);
  r.info.run_start_t = run_start;
  r.info.run_end_t = run_end;
  const auto events = read_history_dir((dir / "history").string());
  r.findings = analyze(events, r.info);
  bool judged = true;
  r.expect = expectation_for(*scenario, cfg.strategy, &judged);
  r.verdict = judge(r.findings, r.expect);
  if (!judged) {
    r.verdict.pass = true;
    r.verdict.problems.clear();
  }
  r.setup = {{"scenario", cfg.scenario + ": " + scenario->summary},
             {"strategy", cfg.strategy},
             {"dlock", DLOCK_VERSION_STRING},
             {"redis", redis_version(cfg.redis_server)},
             {"workers", std::to_string(cfg.workers)},
             {"lease", std::to_string(cfg.ttl_ms) + " ms (renewed every " + std::to_string(cfg.ttl_ms / 3) + " ms)"},
             {"think", "U(0, " + std::to_string(cfg.think_ms) + ") ms"},
             {"duration", std::to_string(cfg.duration_ms) + " ms"},
             {"seed", std::to_string(cfg.seed)},
             {"failpoints", scenario->failpoints.empty() ? "none" : scenario->failpoints},
             {"expectation", r.expect.assumption + (judged ? "" : " (not judged)")}};
  write_file(dir / "report.txt", render_text(r));
  write_file(dir / "report.json", render_json(r));
  write_file(dir / "timeline.html", render_html(r, events));
  return r;
}

}  // namespace torture

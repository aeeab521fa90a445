#include "run.hpp"

#include <signal.h>
#include <unistd.h>

#include <dlock/version.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <thread>
#include <type_traits>

#include "run_ctx.hpp"
#include "scenarios.hpp"
#include "strategies.hpp"
#include "strategies_recipes.hpp"
#include "strategies_sql.hpp"
#include "topology.hpp"

namespace torture {
namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

// After the nemesis loop: resume and heal everything, ending every fault
// window still open in the history (a worker may have stopped itself at a
// failpoint after the loop's last housekeeping), then mark the heal, which
// closes any window left open.
void heal_everything(RunCtx& c) {
  c.housekeeping();  // logs self-stops the loop did not see
  c.proxy().set_delay("", std::chrono::milliseconds(0));
  c.proxy().hold_replies("", std::chrono::milliseconds(0));
  c.proxy().blackhole("", false);
  c.proxy().drop_replies("", false);
  c.proxy().refuse("", false);
  for (int w = 0; w < c.workers(); ++w) {
    WorkerProc& p = c.procs[w];
    p.clock->set_offset(std::chrono::milliseconds(0));
    if (const int self = c.worker_pid(w); self > 0) ::kill(self, SIGCONT);
    if (p.pid > 0 && p.resume_at != 0)
      c.fault_end("failpoint-pause", p.args.proc, "SIGCONT at the heal after the nemesis loop");
    p.paused_by_nemesis = false;
    p.resume_at = 0;
  }
  Event heal;
  heal.t = mono_ns();
  heal.proc = "nemesis";
  heal.pid = static_cast<int>(::getpid());
  heal.op = "heal";
  heal.detail = "every worker resumed, proxies and clocks healed";
  c.log->write(heal);
}

// An ensemble whose server 0 reaches its peers (and they it) through
// proxies. Needs the ensemble's peer routes (tools/common/zk_ensemble):
// a build without them refuses the scenario (kZkPeerRoutes).
template <class Ensemble>
std::unique_ptr<Ensemble> routed_ensemble(RunCtx& c, int servers, const std::string& dir) {
  using Route = std::function<int(int, int, int)>;
  if constexpr (std::is_constructible_v<Ensemble, int, const std::string&, Route>) {
    auto links = std::make_shared<std::map<std::string, int>>();  // a config is written at every start
    Route route = [&c, links](int viewer, int peer, int port) {
      if (viewer != 0 && peer != 0) return port;
      const std::string name = "peer-" + std::to_string(viewer) + "-" + std::to_string(peer);
      auto& p = c.peer_proxies[port];
      if (!p) {
        p = std::make_unique<Proxy>("127.0.0.1", static_cast<std::uint16_t>(port));
        p->start();
        c.peer_net.add(p.get());
      }
      auto [it, fresh] = links->try_emplace(name + "@" + std::to_string(port), 0);
      if (fresh) it->second = p->add_link(name);
      return it->second;
    };
    return std::make_unique<Ensemble>(servers, dir, route);
  } else {
    (void)c, (void)servers, (void)dir;
    throw std::runtime_error("this build's ZooKeeper ensemble cannot route peer links");
  }
}

// A throw-away CA and a server certificate for 127.0.0.1 in <dir>/tls,
// made by the openssl tool; the redis-server arguments that serve them.
std::string tls_ca_of(const fs::path& dir) { return fs::absolute(dir / "tls" / "ca.crt").string(); }
std::vector<std::string> make_tls_files(const fs::path& dir) {
  const fs::path d = fs::absolute(dir / "tls");
  fs::create_directories(d);
  const std::string log = (d / "openssl.log").string(), ca = tls_ca_of(dir);
  const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"};
  auto run = [&](std::vector<std::string> argv) {
    if (run_to_end(std::move(argv), log, 30) != 0) throw std::runtime_error("openssl failed: see " + log);
  };
  std::vector<std::string> mk_ca = {"openssl", "req", "-x509"};
  mk_ca.insert(mk_ca.end(), ec.begin(), ec.end());
  mk_ca.insert(mk_ca.end(),
               {"-keyout", (d / "ca.key").string(), "-out", ca, "-subj", "/CN=dlock torture CA", "-days", "2",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"});
  run(mk_ca);
  std::vector<std::string> csr = {"openssl", "req"};
  csr.insert(csr.end(), ec.begin(), ec.end());
  csr.insert(csr.end(),
             {"-keyout", (d / "server.key").string(), "-out", (d / "server.csr").string(), "-subj", "/CN=127.0.0.1"});
  run(csr);
  std::ofstream(d / "server.ext") << "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
                                     "subjectAltName=IP:127.0.0.1\n";
  run({"openssl", "x509", "-req", "-in", (d / "server.csr").string(), "-CA", ca, "-CAkey", (d / "ca.key").string(),
       "-CAcreateserial", "-days", "2", "-extfile", (d / "server.ext").string(), "-out", (d / "server.crt").string()});
  return {"--tls-cert-file",    (d / "server.crt").string(),
          "--tls-key-file",     (d / "server.key").string(),
          "--tls-ca-cert-file", ca,
          "--tls-auth-clients", "no"};
}

// Three etcd members, each client port behind its own proxy, elections
// scaled for leases of a second (etcd's shortest lease is 1.5 election
// timeouts); with peer_proxies, the others hear member 0 through a proxy.
void start_etcd_cluster(RunCtx& c, const Scenario& scenario, const fs::path& dir) {
  fs::create_directories(dir / "lock-server");
  dlock::tools::EtcdCluster::Options o;
  o.parent = fs::absolute(dir / "lock-server").string();
  o.extra = {"--heartbeat-interval", "50", "--election-timeout", "500"};
  if (scenario.peer_proxies)
    o.peer_route = [&c](int member, int port) {
      if (member != 0) return port;
      auto& p = c.peer_proxies[port];
      p = std::make_unique<Proxy>("127.0.0.1", static_cast<std::uint16_t>(port));
      p->start();
      c.peer_net.add(p.get());
      return static_cast<int>(p->add_link("peers-of-0"));
    };
  c.etcd = std::make_unique<dlock::tools::EtcdCluster>(std::move(o));
  for (int i = 0; i < c.etcd->size(); ++i) {
    LockNode n;
    n.proxy = std::make_unique<Proxy>("127.0.0.1", static_cast<std::uint16_t>(c.etcd->client_port(i)));
    c.net.add(n.proxy.get());
    c.nodes.push_back(std::move(n));
  }
}

// The lock server(s), each behind its own proxy: Redis (one, or the Redlock
// set), PostgreSQL, a ZooKeeper ensemble or an etcd cluster, or none for
// SQLite.
void start_lock_servers(RunCtx& c, const RunConfig& cfg, const Scenario& scenario, const fs::path& dir) {
  const LockServer kind = lock_server_of(cfg.strategy);
  if (const std::string topology = redis_topology_of(cfg.strategy); !topology.empty())
    return start_topology(c, topology, cfg.redis_server, fs::absolute(dir).string());
  if (kind == LockServer::postgres) {
    fs::create_directories(dir / "lock-server");
    c.pg =
        std::make_unique<PgProc>(fs::absolute(dir / "lock-server" / "postgres.log").string(), scenario.server_settings);
    c.pg->query(kNaiveTableSql);
    LockNode n;
    n.proxy = std::make_unique<Proxy>("127.0.0.1", c.pg->port());
    c.net.add(n.proxy.get());
    c.nodes.push_back(std::move(n));
    return;
  }
  if (kind == LockServer::zookeeper) {
    // Three servers, each behind its own proxy; logs stay in the run dir.
    fs::create_directories(dir / "lock-server");
    const std::string zk_dir = fs::absolute(dir / "lock-server").string();
    if (scenario.peer_proxies)
      c.zk = routed_ensemble<dlock::tools::ZooKeeperEnsemble>(c, lock_nodes(cfg.strategy), zk_dir);
    else
      c.zk = std::make_unique<dlock::tools::ZooKeeperEnsemble>(lock_nodes(cfg.strategy), zk_dir);
    for (int i = 0; i < c.zk->size(); ++i) {
      LockNode n;
      n.proxy = std::make_unique<Proxy>("127.0.0.1", static_cast<std::uint16_t>(c.zk->client_port(i)));
      c.net.add(n.proxy.get());
      c.nodes.push_back(std::move(n));
    }
    return;
  }
  if (kind == LockServer::etcd) return start_etcd_cluster(c, scenario, dir);
  const int node_count = lock_nodes(cfg.strategy);
  std::vector<std::string> tls_args;
  if (tls_of(cfg.strategy)) tls_args = make_tls_files(dir);
  for (int i = 0; i < node_count; ++i) {
    const std::string tag = node_count == 1 ? "" : "-" + std::to_string(i);
    LockNode n;
    n.clock = std::make_unique<ClockControl>((dir / ("clock-server" + tag)).string());
    ServerSpec spec;
    spec.binary = cfg.redis_server;
    spec.dir = fs::absolute(dir / ("lock-server" + tag)).string();
    fs::create_directories(spec.dir);
    spec.aof_always = scenario.aof_always;
    spec.clock_shim = cfg.clock_shim;
    spec.clock_file = n.clock->path();
    // TLS: the clients' port is the TLS one (behind the proxy); the admin
    // keeps the plain one.
    const std::uint16_t tls_port = tls_args.empty() ? 0 : free_port();
    if (tls_port != 0) {
      spec.extra_args = tls_args;
      spec.extra_args.insert(spec.extra_args.begin(), {"--tls-port", std::to_string(tls_port)});
    }
    n.server = std::make_unique<ServerProc>(spec);
    n.server->start();
    n.admin = std::make_unique<SyncRedis>("127.0.0.1", n.server->port(), std::chrono::milliseconds(2000));
    n.proxy = std::make_unique<Proxy>("127.0.0.1", tls_port != 0 ? tls_port : n.server->port());
    c.net.add(n.proxy.get());
    c.nodes.push_back(std::move(n));
  }
}

std::int64_t think_ms_of(const RunConfig& cfg, const Scenario& scenario) {
  if (scenario.think_leases > 0)
    return static_cast<std::int64_t>(scenario.think_leases * static_cast<double>(cfg.ttl_ms));
  // A leader thinks once per round (2.5 rounds on average): a scenario's
  // long hold is shared among them.
  if (scenario.think_ms > 0) return recipe_of(cfg.strategy) == "election" ? scenario.think_ms / 2 : scenario.think_ms;
  // Line order is judged only for waiters that waited longer than the join
  // bound (a quarter lease): holds of up to 0.3 lease (a leader's 1-4 rounds
  // of up to 1/8 lease) keep three waiters in line that long.
  const std::string recipe = recipe_of(cfg.strategy);
  if (recipe == "fair") return std::max(cfg.think_ms, cfg.ttl_ms * 3 / 10);
  if (recipe == "election") return std::max(cfg.think_ms, cfg.ttl_ms / 8);
  return cfg.think_ms;
}

void plan_workers(RunCtx& c, const RunConfig& cfg, const Scenario& scenario, const fs::path& dir,
                  std::uint16_t resource_port) {
  const std::int64_t think_ms = think_ms_of(cfg, scenario);
  const std::string slots_path = fs::absolute(dir / "slots").string();
  c.slots = std::make_unique<SlotTable>(slots_path, cfg.workers, true);
  for (int w = 0; w < cfg.workers; ++w) {
    WorkerProc p;
    p.args.proc = "w" + std::to_string(w);
    p.args.slot = w;
    p.args.slots = slots_path;
    p.args.slot_count = cfg.workers;
    p.args.strategy = cfg.strategy;
    for (auto& n : c.nodes) p.args.lock_ports.push_back(n.proxy->add_link(p.args.proc));
    if (scenario.peer_proxies && w % 2 == 1)  // a client of server 0 only
      for (auto& port : p.args.lock_ports) port = p.args.lock_ports.front();
    if (const std::string topology = redis_topology_of(cfg.strategy); !topology.empty())
      p.args.lock_url = topology_url(c, topology, p.args.lock_ports);
    if (tls_of(cfg.strategy))
      p.args.lock_url = "rediss://" + torture_userinfo() + "127.0.0.1:" + std::to_string(p.args.lock_ports.at(0)) +
                        "?cacert=" + tls_ca_of(dir);
    if (lock_server_of(cfg.strategy) == LockServer::sqlite)
      p.args.sqlite_path = fs::absolute(dir / "locks.db").string();
    p.args.resource_port = resource_port;
    p.args.ttl_ms = cfg.ttl_ms;
    p.args.think_ms = think_ms;
    p.args.think_min_ms = static_cast<std::int64_t>(scenario.think_min_leases * static_cast<double>(cfg.ttl_ms));
    p.args.wait_ms = 3 * cfg.ttl_ms;
    p.args.history = fs::absolute(dir / "history" / (p.args.proc + ".jsonl")).string();
    p.args.seed = cfg.seed * 100 + static_cast<std::uint64_t>(w);
    p.args.failpoints = scenario.failpoints;
    p.args.permits = cfg.permits;
    p.clock = std::make_unique<ClockControl>(fs::absolute(dir / ("clock-" + p.args.proc)).string());
    if (scenario.user) p.args.user = scenario.user(w);
    c.procs.push_back(std::move(p));
  }
}

// The replica replicates through the proxy, so the nemesis can cut it off.
void start_replica(RunCtx& c, const RunConfig& cfg, const fs::path& dir) {
  ServerSpec rs;
  rs.binary = cfg.redis_server;
  rs.dir = fs::absolute(dir / "replica-server").string();
  fs::create_directories(rs.dir);
  rs.extra_args = {"--replicaof", "127.0.0.1", std::to_string(c.node(0).proxy->add_link("replication"))};
  c.replica = std::make_unique<ServerProc>(rs);
  c.replica->start();
  SyncRedis probe("127.0.0.1", c.replica->port(), std::chrono::milliseconds(500));
  for (int i = 0; i < 500; ++i) {
    auto info = probe.cmd({"INFO", "replication"});
    if (info.str.find("master_link_status:up") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string server_version(const RunConfig& cfg) {
  switch (lock_server_of(cfg.strategy)) {
    case LockServer::postgres:
      return "PostgreSQL " + postgres_version();
    case LockServer::sqlite:
      return std::string("SQLite (the library's)");
    case LockServer::zookeeper:
      return std::string("ZooKeeper (Debian's package), 3 servers, tickTime 200 ms");
    case LockServer::etcd:
      return std::string("etcd (Debian's package), 3 members, heartbeat 50 ms, election timeout 500 ms");
    case LockServer::redis:
      break;
  }
  const std::string topology = redis_topology_of(cfg.strategy);
  return "Redis " + redis_version(cfg.redis_server) +
         (topology == "cluster"    ? ", a cluster of 3 masters with a replica each"
          : topology == "sentinel" ? ", a master, its replica and 3 sentinels"
          : tls_of(cfg.strategy)   ? ", reached over TLS (rediss://, its certificate verified)"
                                   : "");
}

// The scenario `cfg` names, if it applies to its strategy; throws otherwise.
const Scenario& checked_scenario(const RunConfig& cfg) {
  const Scenario* scenario = find_scenario(cfg.scenario);
  if (!scenario) throw std::runtime_error("unknown scenario '" + cfg.scenario + "'");
  if (!applies(*scenario, cfg.strategy))
    throw std::runtime_error("scenario '" + cfg.scenario + "' does not apply to strategy '" + cfg.strategy + "'");
  return *scenario;
}

// An empty run directory, and the context the nemesis will drive.
void prepare_run(RunCtx& c, const RunConfig& cfg, const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir / "history");
  fs::create_directories(dir / "resource-server");
  c.ttl = cfg.ttl_ms;
  c.rng.seed(cfg.seed);
  c.self_exe = cfg.self_exe;
  c.clock_shim = cfg.clock_shim;
  c.log = std::make_unique<HistoryWriter>((dir / "history" / "verifier.jsonl").string());
}

// The server of the resources the workers write: fault-free, reached
// directly.
ServerSpec resource_spec(const RunConfig& cfg, const fs::path& dir) {
  ServerSpec spec;
  spec.binary = cfg.redis_server;
  spec.dir = fs::absolute(dir / "resource-server").string();
  return spec;
}

// The resource counter's final value, which the lost-update check compares
// with the increments acknowledged.
void log_final_counter(RunCtx& c, SyncRedis& resources) {
  Event fin;
  fin.t = mono_ns();
  fin.proc = "verifier";
  fin.op = "final";
  fin.kind = "counter";
  auto counter = resources.cmd({"GET", "counter"});
  fin.value = counter.good() && !counter.is_nil ? std::stoll(counter.str) : 0;
  c.log->write(fin);
}

void stop_servers(RunCtx& c, ServerProc& resource) {
  c.sentinels.clear();  // first: no failover while the data nodes stop
  for (auto& n : c.nodes) {
    n.proxy.reset();
    if (n.server) n.server->stop();
  }
  c.pg.reset();
  c.zk.reset();
  c.etcd.reset();
  if (c.replica) c.replica->stop();
  resource.stop();
}

RunInfo run_info(const RunConfig& cfg, std::int64_t run_start, std::int64_t run_end) {
  RunInfo info;
  info.scenario = cfg.scenario;
  info.strategy = cfg.strategy;
  info.ttl_ms = cfg.ttl_ms;
  info.recovery_slack_ms = std::max<std::int64_t>(250, cfg.ttl_ms / 4);
  // ZooKeeper expires a silent session in the first tick after its timeout
  // (sessions expire in buckets of one tick), then wakes the next waiter:
  // the bound is one tick longer.
  if (lock_server_of(cfg.strategy) == LockServer::zookeeper)
    info.recovery_slack_ms += dlock::tools::ZooKeeperEnsemble::kTickMs;
  // etcd's leader looks for expired leases every 500 ms, then revokes them
  // through the log; and the lease is whole seconds.
  if (lock_server_of(cfg.strategy) == LockServer::etcd)
    info.recovery_slack_ms += 600 + (1000 - cfg.ttl_ms % 1000) % 1000;
  info.run_start_t = run_start;
  info.run_end_t = run_end;
  info.recipe = recipe_of(cfg.strategy);
  info.permits = cfg.permits;
  // A waiter is in the line once its first request was answered or timed
  // out and retried: the workers' command timeout (strategies_recipes.cpp).
  if (info.recipe == "fair" || info.recipe == "election")
    info.line_join_bound_ms = std::max<std::int64_t>(50, cfg.ttl_ms / 4);
  return info;
}

// The set-up lines of the report; `think_min_ms` is the workers' shortest
// think.
std::vector<std::pair<std::string, std::string>> setup_lines(const RunConfig& cfg, const Scenario& scenario,
                                                             const RunReport& r, std::int64_t think_min_ms,
                                                             bool judged) {
  return {{"scenario", cfg.scenario + ": " + scenario.summary},
          {"strategy", cfg.strategy},
          {"dlock", DLOCK_VERSION_STRING},
          {"lock server", server_version(cfg)},
          {"workers", std::to_string(cfg.workers)},
          {"lease", std::to_string(cfg.ttl_ms) + " ms (renewed every " + std::to_string(cfg.ttl_ms / 3) + " ms)"},
          {"think", "U(" + std::to_string(think_min_ms) + ", " + std::to_string(think_ms_of(cfg, scenario)) + ") ms"},
          {"duration", std::to_string(cfg.duration_ms) + " ms"},
          {"seed", std::to_string(cfg.seed)},
          {"failpoints", scenario.failpoints.empty() ? "none" : scenario.failpoints},
          {"recipe", r.info.recipe.empty() ? std::string("none (a plain mutex)")
                                           : r.info.recipe + (r.info.recipe == "semaphore"
                                                                  ? " of " + std::to_string(cfg.permits) + " permits"
                                                                  : std::string())},
          {"expectation", r.expect.assumption + (judged ? "" : " (not judged)")}};
}

// The findings in the history, held against the scenario's expectation. A
// naive strategy outside the scenarios that must catch it is shown, not
// judged: it passes.
RunReport report_of(const RunConfig& cfg, const Scenario& scenario, const RunInfo& info,
                    const std::vector<Event>& events, std::int64_t think_min_ms) {
  RunReport r;
  r.info = info;
  r.findings = analyze(events, r.info);
  bool judged = true;
  r.expect = expectation_for(scenario, cfg.strategy, &judged);
  r.verdict = judge(r.findings, r.expect);
  if (!judged) {
    r.verdict.pass = true;
    r.verdict.problems.clear();
  }
  r.setup = setup_lines(cfg, scenario, r, think_min_ms, judged);
  return r;
}

}  // namespace

RunReport run_one(const RunConfig& asked) {
  const Scenario& scenario = checked_scenario(asked);
  RunConfig cfg = asked;
  if (scenario.workers > 0) cfg.workers = scenario.workers;
  const fs::path dir(cfg.out_dir);
  RunCtx c;
  prepare_run(c, cfg, dir);

  start_lock_servers(c, cfg, scenario, dir);
  ServerProc resource(resource_spec(cfg, dir));
  resource.start();
  SyncRedis res_conn("127.0.0.1", resource.port(), std::chrono::milliseconds(2000));
  plan_workers(c, cfg, scenario, dir, resource.port());
  if (redis_topology_of(cfg.strategy).empty())  // a topology's are running already
    for (auto& n : c.nodes) n.proxy->start();
  if (scenario.replica) start_replica(c, cfg, dir);
  if (scenario.prepare) scenario.prepare(c);
  c.wrap_worker = scenario.wrap;

  const auto run_start = mono_ns();
  c.end_t = run_start + cfg.duration_ms * 1'000'000;
  for (int w = 0; w < cfg.workers; ++w) c.spawn(w);
  scenario.nemesis(c);
  heal_everything(c);
  c.stop_workers();
  log_final_counter(c, res_conn);
  const auto run_end = mono_ns();
  stop_servers(c, resource);

  const auto events = read_history_dir((dir / "history").string());
  RunReport r = report_of(cfg, scenario, run_info(cfg, run_start, run_end), events,
                          c.procs.empty() ? 0 : c.procs[0].args.think_min_ms);
  write_file(dir / "report.txt", render_text(r));
  write_file(dir / "report.json", render_json(r));
  write_file(dir / "timeline.html", render_html(r, events));
  return r;
}

}  // namespace torture

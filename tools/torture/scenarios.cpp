// The scenario catalogue, put together from its parts in a fixed order (the
// order `list` shows and the suites run), and the plans of the suites.
#include "scenarios.hpp"

#include "scenarios_common.hpp"
#include "strategies.hpp"
#include "strategies_peers.hpp"

namespace torture {
namespace {

std::vector<Scenario> make_scenarios() {
  std::vector<Scenario> v;
  add_holder_and_clock_scenarios(v);
  add_server_restart_scenarios(v);
  add_network_scenarios(v);
  add_postgres_scenarios(v);
  add_zookeeper_scenarios(v);
  add_etcd_scenarios(v);
  add_redlock_node_scenarios(v);
  add_environment_scenarios(v);
  add_topology_scenarios(v);
  add_server_limit_scenarios(v);
  return v;
}

}  // namespace

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> all = make_scenarios();
  return all;
}

const Scenario* find_scenario(const std::string& name) {
  for (const auto& s : scenarios())
    if (s.name == name) return &s;
  return nullptr;
}

unsigned setup_of(const std::string& strategy) {
  if (strategy == "dlock-run") return kCli;
  switch (lock_server_of(strategy)) {
    case LockServer::postgres:
      return kPostgres;
    case LockServer::sqlite:
      return kSqlite;
    case LockServer::zookeeper:
      return kZooKeeper;
    case LockServer::etcd:
      return kEtcd;
    case LockServer::redis:
      break;
  }
  if (redis_topology_of(strategy) == "cluster") return kCluster;
  if (redis_topology_of(strategy) == "sentinel") return kSentinel;
  return lock_nodes(strategy) > 1 ? kRedlock : kRedis;
}

// Over TLS, all but the async-replica failover: its replica replicates
// through the lock server's proxy, which carries TLS there.
bool applies(const Scenario& s, const std::string& strategy) {
  if (tls_of(strategy) && s.name == "failover") return false;
  return (s.setups & setup_of(strategy)) != 0;
}

Expectation expectation_for(const Scenario& s, const std::string& strategy, bool* judged) {
  *judged = true;
  if (strategy == "redlock" && s.redlock) return *s.redlock;
  if (!is_naive(strategy)) return s.dlock;
  Expectation e;
  e.overlap_allowed = true;
  e.lost_updates_allowed = true;
  e.fence_anomaly_allowed = true;
  e.min_faults = s.dlock.min_faults;
  for (const auto& m : s.must_catch)
    if (m == strategy) {
      e.must_be_caught = true;
      e.assumption = "naive control: must be caught here";
      return e;
    }
  *judged = false;
  e.assumption = "naive control, not judged in this scenario";
  return e;
}

// Redlock's server faults hit node 0 of five (acl-revoke, maxclients,
// server-stall, restart-aof) and its transport faults take dlock's code
// paths (late-reply, net-reset, net-unreachable, long-hold): the short
// suite runs those on one server (dlock) and keeps Redlock's own, the
// clocks, and the faults a quorum sees. The full suite runs them all.
namespace {
bool short_redlock(const std::string& scenario) {
  for (const char* s : {"acl-revoke", "maxclients", "server-stall", "restart-aof", "late-reply", "net-reset",
                        "net-unreachable", "long-hold"})
    if (scenario == s) return false;
  return true;
}
}  // namespace

std::vector<PlannedRun> short_suite() {
  std::vector<PlannedRun> v;
  for (const char* st : {"dlock", "redlock", "postgres", "sqlite", "zk", "dlock-run"})
    for (const auto& s : scenarios())
      if (applies(s, st) && !s.full_only && (std::string(st) != "redlock" || short_redlock(s.name)))
        v.push_back({s.name, st});
  // Cluster and Sentinel: their own faults, a holder cut off, lost replies.
  // etcd: its own faults, contention, a holder killed, paused or cut off,
  // and the network's faults on the gRPC connections.
  if (etcd_built())
    for (const auto& s : scenarios())
      if (applies(s, "etcd") && !s.full_only &&
          (s.setups == kEtcd || s.name == "baseline" || s.name == "holder-kill" || s.name == "pause" ||
           s.name == "partition" || s.name == "net-drop" || s.name == "net-delay"))
        v.push_back({s.name, "etcd"});
  for (const char* st : {"cluster", "sentinel"})
    for (const auto& s : scenarios())
      if (applies(s, st) && !s.full_only &&
          ((s.setups & ~unsigned{kTopologies}) == 0 || s.name == "partition" || s.name == "net-drop"))
        v.push_back({s.name, st});
  // TLS: a holder paused, replies lost mid-stream, connections reset, the
  // server restarted (every new TLS connection, the fast path's too).
  for (const char* s : {"pause", "net-drop", "net-reset", "restart"}) v.push_back({s, "dlock-tls"});
  // The plain layout (one string key, shared with redis-py and redlock):
  // contention, a holder killed, paused, cut off, replies lost after the
  // write ran (the server's and the transport's other faults take the
  // default layout's code: the full suite runs them here too).
  for (const char* s : {"baseline", "holder-kill", "pause", "partition", "net-drop"}) v.push_back({s, "dlock-plain"});
  // A mixed fleet: half the workers redis-py's own Lock, half dlock, on one
  // key: contention, holders killed, paused, cut off, replies lost.
  for (const char* s : {"baseline", "holder-kill", "pause", "partition", "net-drop"}) v.push_back({s, "mixed-plain"});
  // The same on ZooKeeper: half the workers kazoo's own Lock, half dlock
  // in kazoo's names: contention, holders killed, paused, cut off.
  for (const char* s : {"baseline", "holder-kill", "pause"}) v.push_back({s, "mixed-kazoo"});
  // And on Redisson's RLock hash, half the workers node-redisson (when it
  // is installed: scripts/test installs it, with Node 20). The full suite
  // runs every scenario on them, and on mixed-redlock (half npm redlock).
  if (node_peer_installed("node-redisson"))
    for (const char* s : {"baseline", "holder-kill", "pause"}) v.push_back({s, "mixed-redisson"});
  // Each naive strategy once, where it must fail.
  v.push_back({"holder-kill", "setnx-del"});
  v.push_back({"holder-kill", "setnx-then-expire"});
  v.push_back({"holder-kill", "db-insert-unique"});
  v.push_back({"long-hold", "db-insert-cleanup-job"});
  v.push_back({"client-clock", "getset-timestamp"});
  v.push_back({"pause", "token-get-then-del"});
  // Correct but a herd: shown for its wake-ups per release, not judged.
  v.push_back({"baseline", "zk-herd"});
  // Each recipe on Redis and on SQLite, under a fault on its holders: a
  // kill (a lost hold, a lost permit, a dead waiter's place in the line) or
  // a pause past the lease (a deposed leader writing, a paused reader or
  // permit holder). The full suite runs them on every backend and scenario.
  for (const char* backend : {"redis", "sqlite"}) {
    const bool redis = std::string(backend) == "redis";
    v.push_back({redis ? "holder-kill" : "pause", std::string("fair-") + backend});
    v.push_back({redis ? "pause" : "holder-kill", std::string("rw-") + backend});
    v.push_back({redis ? "holder-kill" : "pause", std::string("semaphore-") + backend});
    v.push_back({redis ? "pause" : "holder-kill", std::string("election-") + backend});
  }
  return v;
}

std::vector<PlannedRun> full_suite() {
  std::vector<PlannedRun> v;
  for (const auto& s : scenarios())
    for (const auto& st : strategy_names())
      if (applies(s, st)) v.push_back({s.name, st});
  return v;
}

}  // namespace torture

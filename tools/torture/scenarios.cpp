// The scenario catalogue, put together from its parts in a fixed order (the
// order `list` shows and the suites run), and the plans of the suites.
#include "scenarios.hpp"

#include <algorithm>
#include <stdexcept>

#include "scenarios_common.hpp"
#include "strategies.hpp"
#include "strategies_peers.hpp"

namespace torture {
namespace {

std::vector<Scenario> make_scenarios() {
  std::vector<Scenario> v;
  add_holder_and_clock_scenarios(v);
  add_crowd_scenario(v);
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
  if (!is_naive(strategy)) {
    Expectation e = s.dlock;
    if (e.max_waited_through > 0 && std::find(s.wakes_one.begin(), s.wakes_one.end(), strategy) == s.wakes_one.end()) {
      e.max_waited_through = 0;
      e.max_wakeups_per_release = 0;
      e.assumption += " (its waiters are a herd here: the crowd's costs are reported, not judged)";
    }
    return e;
  }
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

// The short suite, what every test run runs (scripts/test, in shards two
// at a time, within about five minutes): for each backend family, one
// scenario per class of fault it meets, the faults of its own server
// kept, each naive strategy once where it must be caught, and each recipe
// on Redis and on SQLite under a kill or a pause of its holders. Left to
// the full suite: contention alone (every scenario has it), a second
// scenario of a class the family already meets (net-delay and net-reset
// beside lost replies, restart-aof beside restart, a long hold beside a
// pause), and on the families that share another's code the faults that
// take it (Redlock's node-0 server faults and transport faults are the
// single server's; TLS, Sentinel and the plain layout run their own).
namespace {
struct ShortRow {
  const char* strategy;
  std::vector<const char*> scenarios;
};

const std::vector<ShortRow>& short_rows() {
  static const std::vector<ShortRow> rows = {
      {"dlock",
       {"pause", "holder-kill", "client-clock", "server-clock", "late-reply", "partition", "net-drop",
        "net-unreachable", "restart", "failover", "server-stall", "acl-revoke", "maxclients", "crowd"}},
      {"redlock", {"pause", "server-clock", "net-drop", "node-restart", "partition-minority"}},
      {"postgres",
       {"pause", "holder-kill", "partition", "net-drop", "pg-restart-immediate", "pg-terminate",
        "pg-async-commit-crash", "pg-search-path", "crowd"}},
      {"sqlite",
       {"pause", "holder-kill", "sqlite-file-delete", "sqlite-file-replace", "sqlite-time-ns", "sqlite-pid-ns",
        "crowd"}},
      {"zk",
       {"pause", "holder-kill", "partition", "net-drop", "zk-leader-kill", "zk-restart-all", "zk-follower-partition"}},
      {"dlock-run", {"cli-tstp"}},
      {"etcd",
       {"pause", "holder-kill", "partition", "net-drop", "etcd-leader-kill", "etcd-member-pause", "etcd-member-cut",
        "etcd-stream-pause", "etcd-operator-delete", "etcd-auth-revoke", "etcd-compaction"}},
      // A failover on Sentinel; Cluster's (a TAKEOVER that, beside another
      // run, once left the cluster unsettled past the harness's 30 s) in the
      // full suite, and in the cluster's own tests.
      {"cluster", {"net-drop", "cluster-migrate", "partition-master"}},
      {"sentinel", {"sentinel-failover", "partition-master"}},
      // TLS: replies lost mid-stream, the server restarted (every new TLS
      // connection, the fast path's too).
      {"dlock-tls", {"net-drop", "restart"}},
      // The plain layout (one string key, shared with redis-py and redlock).
      {"dlock-plain", {"pause", "holder-kill", "net-drop", "fence-counter-deleted"}},
      // Mixed fleets, half the workers the peer's own lock on one name:
      // redis-py's Lock, kazoo's Lock, node-redisson's RLock (when
      // installed: scripts/test installs it, with Node 20).
      {"mixed-plain", {"pause", "holder-kill", "net-drop"}},
      {"mixed-kazoo", {"pause", "holder-kill"}},
      {"mixed-redisson", {"pause", "holder-kill"}},
      // Each naive strategy once, where it must fail.
      {"setnx-del", {"holder-kill"}},
      {"setnx-then-expire", {"holder-kill"}},
      {"db-insert-unique", {"holder-kill"}},
      {"db-insert-cleanup-job", {"long-hold"}},
      {"getset-timestamp", {"client-clock"}},
      {"token-get-then-del", {"pause"}},
      // The recipes: a kill (a lost hold, a lost permit, a dead waiter's
      // place in the line) or a pause past the lease (a deposed leader
      // writing, a paused reader or permit holder).
      {"fair-redis", {"holder-kill"}},
      {"rw-redis", {"pause"}},
      {"semaphore-redis", {"holder-kill"}},
      {"election-redis", {"pause"}},
      {"fair-sqlite", {"pause"}},
      {"rw-sqlite", {"holder-kill"}},
      {"semaphore-sqlite", {"pause"}},
      {"election-sqlite", {"holder-kill"}},
  };
  return rows;
}

// Whether the build and the machine have what `strategy` needs.
bool available(const std::string& strategy) {
  if (lock_server_of(strategy) == LockServer::etcd) return etcd_built();
  if (strategy == "mixed-redisson") return node_peer_installed("node-redisson");
  return true;
}
}  // namespace

std::vector<PlannedRun> short_suite() {
  std::vector<PlannedRun> v;
  for (const auto& row : short_rows()) {
    if (!available(row.strategy)) continue;
    for (const char* name : row.scenarios) {
      // A row that names what is not there is a mistake in this table.
      const Scenario* s = find_scenario(name);
      if (s == nullptr || !applies(*s, row.strategy))
        throw std::logic_error(std::string("short suite: scenario '") + name + "' does not apply to " + row.strategy);
      v.push_back({name, row.strategy});
    }
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

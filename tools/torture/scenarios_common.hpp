// What the scenario files share: the usual shape of a scenario and its
// expectations, the steps several nemeses take, and each file's adder, which
// scenarios.cpp calls in the catalogue's order.
#ifndef DLOCK_TORTURE_SCENARIOS_COMMON_HPP_
#define DLOCK_TORTURE_SCENARIOS_COMMON_HPP_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "scenarios.hpp"

namespace torture {

class PgProc;

// ---- building the catalogue --------------------------------------------------

// No overlap and no stale write expected, after at least `min_faults` faults;
// `why` states the assumption.
Expectation safe(std::int64_t min_faults,
                 std::string why = "no overlap: the fault stays within what a lease tolerates");
// Overlaps and lost updates documented here (and fence anomalies if
// `fence_anomaly`), after at least one fault.
Expectation overlap_ok(const std::string& why, bool fence_anomaly = false);

// Appends a scenario of the usual shape (no failpoints, no persistence, no
// naive strategy that must catch) and returns it for what differs; the
// reference holds until the next append.
Scenario& add(std::vector<Scenario>& v, std::string name, std::string summary, std::function<void(RunCtx&)> nemesis,
              Expectation expect, unsigned setups = kEvery);

// ---- steps of nemeses ---------------------------------------------------------

// Idles until the run ends: the nemesis of a run without faults, and the
// rest of a run whose one fault is over.
void idle_to_end(RunCtx& c);
// Worker w's name, or "nobody" for w < 0 (no holder found).
std::string holder_or_nobody(RunCtx& c, int w);
// A fresh holder among the odd workers (with Scenario::peer_proxies, the
// clients of server 0 only), waited for up to two leases; then whoever
// holds (the cut is a fault all the same: a run with holders of the other
// servers only made none at all); -1 if nobody does.
int holder_of_server0(RunCtx& c);
// Freezes the peer links' proxies (RunCtx::peer_net) for `d`, the fault
// `kind` on `target` started with `proof`, then heals them (the caller ends
// the fault once the servers serve again): the chunks held meanwhile.
std::uint64_t freeze_peer_links(RunCtx& c, std::chrono::milliseconds d, const std::string& kind,
                                const std::string& target, const std::string& proof);
// "server" for a single lock server; "node<i>" in a Redlock set.
std::string node_label(RunCtx& c, int i);
// SIGKILLs lock node i and starts it again after `down` (0: at once), with
// whatever its persistence kept; logs the restart with its proof (pids,
// DBSIZE before and after). `context` ends the first line of proof.
void restart_node(RunCtx& c, int i, std::chrono::milliseconds down, const std::string& context);
// The first column of `sql`'s first row, or "? (why)" when the query fails:
// proof text that must not end a run.
std::string query_or_error(PgProc& pg, const std::string& sql);

// ---- the catalogue's parts, in its order -----------------------------------------

// Contention, holders stopped, killed or answered late, and clocks that jump
// (scenarios_core.cpp).
void add_holder_and_clock_scenarios(std::vector<Scenario>& v);
// A crowd of workers on one name (scenarios_core.cpp).
void add_crowd_scenario(std::vector<Scenario>& v);
// The lock server restarted, with or without persistence, or failed over to
// an asynchronous replica (scenarios_core.cpp).
void add_server_restart_scenarios(std::vector<Scenario>& v);
// The network cut, slowed, lossy or reset, and a server that stalls
// (scenarios_core.cpp).
void add_network_scenarios(std::vector<Scenario>& v);
// PostgreSQL restarted or its backends terminated (scenarios_backends.cpp).
void add_postgres_scenarios(std::vector<Scenario>& v);
// A ZooKeeper leader killed, or the whole ensemble (scenarios_backends.cpp).
void add_zookeeper_scenarios(std::vector<Scenario>& v);
// An etcd cluster's leader killed, a member paused or cut off, an operator's
// delete, compaction (scenarios_etcd.cpp).
void add_etcd_scenarios(std::vector<Scenario>& v);
// Redlock's nodes restarted or cut off in a minority (scenarios_backends.cpp).
void add_redlock_node_scenarios(std::vector<Scenario>& v);
// Faults in a backend's surroundings: server settings, the lock file,
// namespaces, the CLI (scenarios_env.cpp).
void add_environment_scenarios(std::vector<Scenario>& v);
// The faults of a Redis Cluster and of Sentinel: failover, slot migration,
// a master cut off (scenarios_topology.cpp).
void add_topology_scenarios(std::vector<Scenario>& v);
// The faults of a Redis server's rights and limits: ACL, maxclients
// (scenarios_server_limits.cpp).
void add_server_limit_scenarios(std::vector<Scenario>& v);

}  // namespace torture

#endif  // DLOCK_TORTURE_SCENARIOS_COMMON_HPP_

// The Redis Cluster and Sentinel set-ups of the verifier. Every data node
// sits behind its own proxy and announces the proxy's "announce" link (as a
// node behind NAT would), so replication and the sentinels' view go through
// it too: the nemesis can cut a master from its replica alone. Each worker
// reaches node i through its own link on that proxy, told by the URL's nat
// map; the sentinels and the cluster bus are reached directly.
#ifndef DLOCK_TORTURE_TOPOLOGY_HPP_
#define DLOCK_TORTURE_TOPOLOGY_HPP_

#include <cstdint>
#include <string>
#include <vector>

namespace torture {

class RunCtx;

// The name the sentinels know the master by.
constexpr const char* kSentinelMaster = "torture-master";
// The key of the lock every worker takes (lock_keys of "torture").
constexpr const char* kTortureLockKey = "dlock:{torture}";

// Starts the data nodes (cluster: 3 masters and a replica each; Sentinel: a
// master and its replica) into c.nodes, each behind a started proxy, and
// the sentinels; forms the set-up and waits until it serves (throws
// std::runtime_error after 30 s). `topology` as redis_topology_of().
void start_topology(RunCtx& c, const std::string& topology, const std::string& redis_server, const std::string& dir);

// The dlock URL of a worker whose link to node i is `links[i]`.
std::string topology_url(const RunCtx& c, const std::string& topology, const std::vector<std::uint16_t>& links);

// The data node that serves the torture lock now (cluster: its slot's
// master; Sentinel: the master the sentinels agree on); -1 if none.
int lock_master(RunCtx& c);
// A running node that replicates `master` now; -1 if none.
int replica_of(RunCtx& c, int master);

}  // namespace torture

#endif  // DLOCK_TORTURE_TOPOLOGY_HPP_

// Administration of a private Redis Cluster or Sentinel set-up on loopback,
// shared by the tests and the verifier: form a cluster of servers already
// started in cluster mode, ask who serves a slot, migrate a slot, fail over,
// and wait until the servers agree again. The callers start and stop the
// processes their own way (tests/support's RedisServer, the verifier's
// ServerProc); this only talks to them, over SyncRedis.
//
// A node may announce another port than the one it listens on (a proxy in
// front of it: cluster-announce-port, replica-announce-port); answers that
// name nodes (CLUSTER NODES, the sentinels' master address) are matched by
// the announced port.
#ifndef DLOCK_TOOLS_COMMON_REDIS_TOPOLOGY_HPP_
#define DLOCK_TOOLS_COMMON_REDIS_TOPOLOGY_HPP_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/sync_redis.hpp"

namespace dlock::tools {

struct TopologyNode {
  std::uint16_t port = 0;       // where the admin connects: the server itself
  std::uint16_t announced = 0;  // the port the servers tell clients; 0: port
  std::uint16_t bus = 0;        // cluster bus port; 0: port + 10000
  std::uint16_t told() const { return announced ? announced : port; }
};

// Whether node i's process runs now (nodes that do not are not asked;
// sentinel k is sentinel_hook_index(k)), and what to append to an error:
// the servers' log tails.
constexpr int sentinel_hook_index(int k) { return 100 + k; }
struct TopologyHooks {
  std::function<bool(int)> running = [](int) { return true; };
  std::function<std::string()> tails = [] { return std::string(); };
};

// Polls `done` every 20 ms (an exception from it counts as false: a node
// restarting); after `limit`, throws std::runtime_error "timed out waiting
// until <what>" with the tails.
void wait_until(const std::string& what, std::chrono::milliseconds limit, const std::function<bool()>& done,
                const TopologyHooks& hooks);

// redis-server arguments of a cluster node made for tests: cluster mode,
// a 1 s node timeout (quick failovers), any replica may take over however
// long it was cut off, and every slot must be served.
std::vector<std::string> cluster_server_args();

class ClusterAdmin {
 public:
  // Node i < masters is a master of the i-th share of the slots; node
  // masters + k replicates node k % masters.
  ClusterAdmin(std::vector<TopologyNode> nodes, int masters, TopologyHooks hooks = {});

  // Assigns the slots, joins every node and the replicas to their masters,
  // then waits until it is ok (throws after 30 s).
  void form();

  int size() const { return static_cast<int>(nodes_.size()); }
  const TopologyNode& node(int i) const { return nodes_.at(static_cast<std::size_t>(i)); }
  // A command to node i, its answer as text (Reply::text).
  std::string cli(int i, const std::vector<std::string>& args) const;
  std::string id(int i) const;
  int slot_of(const std::string& key) const;  // CLUSTER KEYSLOT, by a running node
  // The node that serves `slot` as node `asked` (-1: any running one) sees
  // it; -1 if none.
  int master_of_slot(int slot, int asked = -1) const;
  bool is_master(int i) const;
  // Moves `slot` to node `to` as redis-cli --cluster reshard does:
  // IMPORTING, MIGRATING, MIGRATE of every key, SETSLOT NODE on every
  // master. stop_before 1: return after the two SETSLOTs; 2: after the
  // keys moved (the source answers ASK); 0: finish.
  void migrate_slot(int slot, int to, int stop_before = 0);
  // CLUSTER FAILOVER [FORCE|TAKEOVER] on `replica`; waits until it is
  // master and the cluster is ok.
  void failover(int replica, const std::string& mode = "");
  // Every running node reports cluster_state:ok and they agree on who
  // serves slots 0, 8000 and 16383, a running node each.
  bool ok() const;
  void wait_ok(std::chrono::milliseconds limit = std::chrono::milliseconds(30000)) const;

 private:
  SyncRedis& conn(int i) const;
  int index_of_told(int port) const;

  std::vector<TopologyNode> nodes_;
  int masters_;
  TopologyHooks hooks_;
  std::vector<std::unique_ptr<SyncRedis>> conns_;
};

class SentinelAdmin {
 public:
  // data[0] is the first master, data[1] its replica; `name` the master's
  // name to the sentinels.
  SentinelAdmin(std::vector<TopologyNode> data, std::vector<std::uint16_t> sentinels, std::string name,
                TopologyHooks hooks = {});

  // A sentinel's configuration file: watch the master `name` at
  // 127.0.0.1:port (its announced port) with a quorum of 2, down after 1 s,
  // failover timeout 3 s.
  static std::string sentinel_config(const std::string& name, std::uint16_t port);
  // Waits until every sentinel knows the others and the replica, and the
  // replica's link is up (throws after 30 s).
  void wait_formed() const;
  // The data node the running sentinels agree is master; -1 if they do not.
  int master_index() const;
  void wait_master(int i, std::chrono::milliseconds limit = std::chrono::milliseconds(30000)) const;
  // SENTINEL FAILOVER (asked again while a previous one settles), then
  // waits until the other data node is master.
  void failover() const;
  std::string cli_sentinel(int k, const std::vector<std::string>& args) const;
  std::string cli_data(int i, const std::vector<std::string>& args) const;

 private:
  std::vector<TopologyNode> data_;
  std::vector<std::uint16_t> sentinels_;
  std::string name_;
  TopologyHooks hooks_;
  std::vector<std::unique_ptr<SyncRedis>> data_conns_, sentinel_conns_;
};

}  // namespace dlock::tools

#endif  // DLOCK_TOOLS_COMMON_REDIS_TOPOLOGY_HPP_

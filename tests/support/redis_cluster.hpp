// A real Redis Cluster for tests: masters and replicas, each a RedisServer
// (redis_server.hpp) with cluster mode on, in its own temp dir, on loopback.
//
//   dlock::test::RedisCluster cluster;            // 3 masters, 1 replica each
//   auto client = dlock::Client::connect(cluster.url());
//   int m = cluster.master_of_key("dlock:{name}");
//   cluster.migrate_slot(slot, to);               // keys and ownership
//   cluster.failover(replica);                    // CLUSTER FAILOVER on it
//
// The layout is fixed: node i < masters serves the i-th third of the slots,
// node masters + i is a replica of node i % masters. The destructor stops
// exactly these servers.
#ifndef DLOCK_TESTS_SUPPORT_REDIS_CLUSTER_HPP_
#define DLOCK_TESTS_SUPPORT_REDIS_CLUSTER_HPP_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/redis_server.hpp"

namespace dlock::test {

class RedisCluster {
 public:
  // Starts the nodes, assigns the slots, joins them and waits until every
  // node reports cluster_state:ok and every replica is in sync. Throws
  // std::runtime_error (with log tails) if that does not happen in 30 s.
  explicit RedisCluster(int masters = 3, int replicas_per_master = 1);
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  int size() const { return static_cast<int>(nodes_.size()); }
  RedisServer& node(int i) { return *nodes_.at(static_cast<std::size_t>(i)); }
  // "redis-cluster://127.0.0.1:P0,127.0.0.1:P1" (the first two nodes as seeds).
  std::string url() const;
  std::string cli(int i, const std::vector<std::string>& args) const;
  // The node's cluster id.
  std::string id(int i) const;
  // CLUSTER KEYSLOT, computed by the server.
  int slot_of(const std::string& key) const;
  // The index of the node that serves `slot` now, as node `asked` sees it
  // (-1: none).
  int master_of_slot(int slot, int asked = -1) const;
  int master_of_key(const std::string& key) const { return master_of_slot(slot_of(key)); }

  // Moves `slot` to node `to` the way redis-cli --cluster reshard does:
  // IMPORTING on the target, MIGRATING on the source, MIGRATE of every key,
  // then SETSLOT NODE on every master. `stop_before`: 1 returns after the
  // two SETSLOTs (no key moved yet), 2 after the keys moved (the slot still
  // MIGRATING: the source answers ASK), 0 finishes.
  void migrate_slot(int slot, int to, int stop_before = 0);
  // CLUSTER FAILOVER [FORCE|TAKEOVER] on replica `replica`, then waits until
  // it reports itself master and the cluster is ok again.
  void failover(int replica, const std::string& mode = "");
  // Waits until every running node reports cluster_state:ok, every slot is
  // served by a running node and no running node's view disagrees.
  void wait_ok(std::chrono::milliseconds limit = std::chrono::milliseconds(30000)) const;
  // Whether node i calls itself master now.
  bool is_master(int i) const;

 private:
  void wait_until(const std::string& what, std::chrono::milliseconds limit, const std::function<bool()>& done) const;
  std::string tails() const;
  int index_of_port(int port) const;

  int masters_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace dlock::test

#endif  // DLOCK_TESTS_SUPPORT_REDIS_CLUSTER_HPP_

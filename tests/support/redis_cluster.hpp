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
#include <memory>
#include <string>
#include <vector>

#include "common/redis_topology.hpp"
#include "support/redis_server.hpp"
#include "support/temp_dir.hpp"

namespace dlock::test {

class RedisCluster {
 public:
  // Starts the nodes, assigns the slots, joins them and waits until every
  // node reports cluster_state:ok and every replica is in sync. Throws
  // std::runtime_error (with log tails) if that does not happen in 30 s.
  // `extra_args` go to every node's redis-server. `tls`: every node serves
  // clients on a TLS port too (a certificate for 127.0.0.1 signed by one
  // throw-away CA), and the cluster bus and replication run over TLS; the
  // plain ports stay for the administration.
  explicit RedisCluster(int masters = 3, int replicas_per_master = 1, std::vector<std::string> extra_args = {},
                        bool tls = false);
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  int size() const { return static_cast<int>(nodes_.size()); }
  RedisServer& node(int i) { return *nodes_.at(static_cast<std::size_t>(i)); }
  // "redis-cluster://127.0.0.1:P0,127.0.0.1:P1" (the first two nodes as
  // seeds); with tls "redis-cluster+tls://" to their TLS ports, "?cacert=CA".
  std::string url() const;
  // The rest as tools/common/redis_topology.hpp's ClusterAdmin, on these
  // nodes (a stopped RedisServer is not asked).
  std::string cli(int i, const std::vector<std::string>& args) const { return admin_->cli(i, args); }
  std::string id(int i) const { return admin_->id(i); }
  int slot_of(const std::string& key) const { return admin_->slot_of(key); }
  int master_of_slot(int slot, int asked = -1) const { return admin_->master_of_slot(slot, asked); }
  int master_of_key(const std::string& key) const { return master_of_slot(slot_of(key)); }
  void migrate_slot(int slot, int to, int stop_before = 0) { admin_->migrate_slot(slot, to, stop_before); }
  void failover(int replica, const std::string& mode = "") { admin_->failover(replica, mode); }
  void wait_ok(std::chrono::milliseconds limit = std::chrono::milliseconds(30000)) const { admin_->wait_ok(limit); }
  bool is_master(int i) const { return admin_->is_master(i); }

 private:
  std::string tails() const;

  std::unique_ptr<TempDir> tls_dir_;  // the CA and the nodes' certificate
  std::vector<int> tls_ports_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
  std::unique_ptr<tools::ClusterAdmin> admin_;
};

}  // namespace dlock::test

#endif  // DLOCK_TESTS_SUPPORT_REDIS_CLUSTER_HPP_

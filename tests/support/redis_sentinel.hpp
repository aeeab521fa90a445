// A real Redis Sentinel set-up for tests: a master, a replica of it and
// three sentinels watching it under the name "mymaster", each a
// RedisServer (redis_server.hpp) on loopback in its own temp dir.
//
//   dlock::test::RedisSentinelSet set;
//   auto client = dlock::Client::connect(set.url());
//   set.failover();                 // SENTINEL FAILOVER: the replica leads
//   set.data(set.master_index())    // the node that is master now
//
// With tls, every node and sentinel also serves TLS (one throw-away CA),
// sentinels reach the data nodes and each other over it, replication runs
// over it, and the servers tell clients their TLS ports; url() is then
// "redis-sentinel+tls://...". The plain ports stay for the tests' admin.
//
// The destructor stops exactly these servers.
#ifndef DLOCK_TESTS_SUPPORT_REDIS_SENTINEL_HPP_
#define DLOCK_TESTS_SUPPORT_REDIS_SENTINEL_HPP_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/redis_topology.hpp"
#include "support/redis_server.hpp"
#include "support/temp_dir.hpp"

namespace dlock::test {

class RedisSentinelSet {
 public:
  static constexpr const char* kName = "mymaster";

  // Starts the master, the replica and the sentinels; waits until every
  // sentinel knows the replica and the other two. Throws std::runtime_error
  // if that takes more than 30 s.
  explicit RedisSentinelSet(bool tls = false);
  ~RedisSentinelSet();
  RedisSentinelSet(const RedisSentinelSet&) = delete;
  RedisSentinelSet& operator=(const RedisSentinelSet&) = delete;

  // "redis-sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster"; with
  // tls "redis-sentinel+tls://" to the TLS ports, "?cacert=CA".
  std::string url() const;
  RedisServer& data(int i) { return *data_.at(static_cast<std::size_t>(i)); }  // 0: first master, 1: replica
  RedisServer& sentinel(int i) { return *sentinels_.at(static_cast<std::size_t>(i)); }
  // As tools/common/redis_topology.hpp's SentinelAdmin, on these servers.
  int master_index() const { return admin_->master_index(); }
  void failover() { admin_->failover(); }
  void wait_master(int i, std::chrono::milliseconds limit = std::chrono::milliseconds(30000)) const {
    admin_->wait_master(i, limit);
  }

 private:
  std::string tails() const;

  TempDir dir_;  // the sentinels' configs; with tls the CA and certificate
  bool tls_ = false;
  std::vector<int> sentinel_tls_ports_;
  std::vector<std::unique_ptr<RedisServer>> data_;
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
  std::unique_ptr<tools::SentinelAdmin> admin_;
};

}  // namespace dlock::test

#endif  // DLOCK_TESTS_SUPPORT_REDIS_SENTINEL_HPP_

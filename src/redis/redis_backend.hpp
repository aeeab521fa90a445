// The Redis backend: lock scripts on a pipelined command connection, release
// notifications on a second, subscribed connection.
#ifndef DLOCK_REDIS_REDIS_BACKEND_HPP_
#define DLOCK_REDIS_REDIS_BACKEND_HPP_

#include <boost/asio/io_context.hpp>
#include <memory>
#include <vector>

#include "backend.hpp"
#include "redis/connection.hpp"

namespace dlock::redis {

// Failover-safe mode: after each grant and renewal, WAIT for `replicas`
// acknowledgements (at most `timeout`). A grant with fewer is undone and fails
// with unavailable; a renewal with fewer fails (not renewed). 0: off.
struct ReplicaWait {
  int replicas = 0;
  milliseconds timeout{100};
};

std::unique_ptr<detail::Backend> make_redis_backend(boost::asio::io_context& io, ConnectionConfig config,
                                                    std::string key_prefix, ReplicaWait wait = {});

// Redis Cluster from its seed nodes (at least one): the same scripts, each
// sent to the master of its lock's slot (route.hpp), fences per name
// (keys.hpp), the watchdog's renewals split by slot.
std::unique_ptr<detail::Backend> make_redis_cluster_backend(boost::asio::io_context& io,
                                                            std::vector<ConnectionConfig> seeds, std::string key_prefix,
                                                            ReplicaWait wait = {});

// A master found through Sentinel (route.hpp), followed across failovers,
// with fences per name as in a cluster: a failover that lost the last
// increments still issues larger fences.
std::unique_ptr<detail::Backend> make_redis_sentinel_backend(boost::asio::io_context& io,
                                                             std::vector<ConnectionConfig> sentinels,
                                                             ConnectionConfig master, std::string master_name,
                                                             std::string key_prefix, ReplicaWait wait = {});

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_REDIS_BACKEND_HPP_

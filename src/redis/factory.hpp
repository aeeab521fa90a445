// The Redis family's URL schemes for the backend registry: redis:// and
// rediss:// (one master, optionally in WAIT mode), redis-cluster:// and
// redis-cluster+tls:// (Redis Cluster, from seed nodes), redis-sentinel://
// and redis-sentinel+tls:// (a master found through Sentinel).
#ifndef DLOCK_REDIS_FACTORY_HPP_
#define DLOCK_REDIS_FACTORY_HPP_

#include <vector>

#include "backend_registry.hpp"
#include "redis/connection.hpp"
#include "redis/url.hpp"

namespace dlock::redis {

// One connection's settings per endpoint. ClientOptions' credentials win
// over the URL's, so secrets need not appear in URLs.
Result<std::vector<ConnectionConfig>> configs_for(std::vector<detail::RedisEndpoint> endpoints,
                                                  detail::BackendContext& context);

Result<std::unique_ptr<detail::Backend>> make_from_url(std::string_view url, detail::BackendContext& context);
Result<std::unique_ptr<detail::Backend>> make_cluster_from_url(std::string_view url, detail::BackendContext& context);
Result<std::unique_ptr<detail::Backend>> make_sentinel_from_url(std::string_view url, detail::BackendContext& context);

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_FACTORY_HPP_

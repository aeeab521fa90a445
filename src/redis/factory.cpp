#include "redis/factory.hpp"

#include "redis/redis_backend.hpp"
#include "redis/url.hpp"

namespace dlock::redis {
namespace {

using detail::RedisEndpoint;

// The URL's WAIT parameters fill in options left at their defaults.
Status apply_wait_params(const RedisEndpoint& ep, ClientOptions& o) {
  const ClientOptions defaults;
  if (ep.wait_replicas && o.wait_replicas == defaults.wait_replicas) o.wait_replicas = *ep.wait_replicas;
  if (ep.wait_timeout_ms && o.wait_timeout == defaults.wait_timeout) o.wait_timeout = milliseconds(*ep.wait_timeout_ms);
  if (o.wait_replicas < 0) return Status(Errc::invalid_argument, "wait_replicas must be >= 0");
  if (o.wait_replicas > 0 && o.wait_timeout.count() <= 0)
    return Status(Errc::invalid_argument, "wait_timeout must be > 0 ms");
  return {};
}

}  // namespace

// ClientOptions' credentials win over the URL's, so secrets need not appear
// in URLs.
Result<std::vector<ConnectionConfig>> configs_for(std::vector<detail::RedisEndpoint> endpoints,
                                                  detail::BackendContext& context) {
  const ClientOptions& o = context.options;
  std::vector<ConnectionConfig> configs;
  for (detail::RedisEndpoint& ep : endpoints) {
    if (!o.username.empty()) ep.username = o.username;
    if (!o.password.empty()) ep.password = o.password;
    if (!ep.username.empty() && ep.password.empty())
      return Status(Errc::invalid_argument, "a user name needs a password");
    ConnectionConfig cfg;
    cfg.endpoint = std::move(ep);
    cfg.connect_timeout = o.connect_timeout;
    cfg.command_timeout = o.command_timeout;
    cfg.backoff_min = o.reconnect_backoff_min;
    cfg.backoff_max = o.reconnect_backoff_max;
    cfg.log = context.log;
    configs.push_back(std::move(cfg));
  }
  return configs;
}

Result<std::unique_ptr<detail::Backend>> make_from_url(std::string_view url, detail::BackendContext& context) {
  auto ep = detail::parse_redis_url(url);
  if (!ep.ok()) return ep.status();
  ClientOptions& o = context.options;
  if (Status s = apply_wait_params(*ep, o); !s.ok()) return s;
  std::vector<RedisEndpoint> one;
  one.push_back(std::move(*ep));
  auto configs = configs_for(std::move(one), context);
  if (!configs.ok()) return configs.status();
  return make_redis_backend(context.io, std::move(configs->front()), o.key_prefix, {o.wait_replicas, o.wait_timeout});
}

Result<std::unique_ptr<detail::Backend>> make_cluster_from_url(std::string_view url, detail::BackendContext& context) {
  auto seeds = detail::parse_cluster_url(url);
  if (!seeds.ok()) return seeds.status();
  ClientOptions& o = context.options;
  if (Status s = apply_wait_params(seeds->front(), o); !s.ok()) return s;
  auto configs = configs_for(std::move(*seeds), context);
  if (!configs.ok()) return configs.status();
  return make_redis_cluster_backend(context.io, std::move(*configs), o.key_prefix, {o.wait_replicas, o.wait_timeout});
}

Result<std::unique_ptr<detail::Backend>> make_sentinel_from_url(std::string_view url, detail::BackendContext& context) {
  auto spec = detail::parse_sentinel_url(url);
  if (!spec.ok()) return spec.status();
  ClientOptions& o = context.options;
  if (Status s = apply_wait_params(spec->master, o); !s.ok()) return s;
  std::vector<RedisEndpoint> master;
  master.push_back(spec->master);
  auto master_config = configs_for(std::move(master), context);
  if (!master_config.ok()) return master_config.status();
  // The sentinels answer without the master's credentials.
  std::vector<ConnectionConfig> sentinels;
  for (RedisEndpoint& ep : spec->sentinels) {
    ConnectionConfig cfg = master_config->front();
    cfg.endpoint = std::move(ep);
    sentinels.push_back(std::move(cfg));
  }
  return make_redis_sentinel_backend(context.io, std::move(sentinels), std::move(master_config->front()),
                                     std::move(spec->master_name), o.key_prefix, {o.wait_replicas, o.wait_timeout});
}

}  // namespace dlock::redis

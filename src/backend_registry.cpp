#include "backend_registry.hpp"

#include <iterator>

#if DLOCK_WITH_REDIS
#include "redis/factory.hpp"
#include "redlock/factory.hpp"
#endif
#if DLOCK_WITH_SQLITE
#include "sqlite/factory.hpp"
#endif
#if DLOCK_WITH_POSTGRES
#include "postgres/factory.hpp"
#endif
#if DLOCK_WITH_ZOOKEEPER
#include "zookeeper/factory.hpp"
#endif
#if DLOCK_WITH_ETCD
#include "etcd/factory.hpp"
#endif

namespace dlock::detail {
namespace {

constexpr BackendScheme kSchemes[] = {
#if DLOCK_WITH_REDIS
    {"redis", redis::make_from_url},
    {"rediss", redis::make_from_url},
    {"redlock", redlock::make_from_url},
    {"redlock+tls", redlock::make_from_url},
    {"redis-cluster", redis::make_cluster_from_url},
    {"redis-cluster+tls", redis::make_cluster_from_url},
    {"redis-sentinel", redis::make_sentinel_from_url},
    {"redis-sentinel+tls", redis::make_sentinel_from_url},
#endif
#if DLOCK_WITH_SQLITE
    {"sqlite", sqlite::make_from_url},
#endif
#if DLOCK_WITH_POSTGRES
    {"postgres", postgres::make_from_url},
    {"postgresql", postgres::make_from_url},
#endif
#if DLOCK_WITH_ZOOKEEPER
    {"zk", zookeeper::make_from_url},
    // Refused with a clear reason (the C client has no TLS).
    {"zk+tls", zookeeper::make_from_url},
#endif
#if DLOCK_WITH_ETCD
    {"etcd", etcd::make_from_url},
    {"etcd+tls", etcd::make_from_url},
#endif
    {"", nullptr},  // keeps the array non-empty in a build without backends
};

std::string scheme_list() {
  std::string out;
  for (const auto& s : backend_schemes()) out += (out.empty() ? "" : ", ") + std::string(s.scheme);
  return out.empty() ? "none" : out;
}

}  // namespace

Status refuse_wait_replicas(const ClientOptions& options, std::string_view backend) {
  if (options.wait_replicas == 0) return {};
  return {Errc::invalid_argument,
          "wait_replicas applies to redis:// masters with replicas, not " + std::string(backend)};
}

Status take_credentials(const ClientOptions& options, std::string& user, std::string& password, std::string_view auth) {
  if (!options.username.empty()) user = options.username;
  if (!options.password.empty()) password = options.password;
  if (user.empty() != password.empty())
    return {Errc::invalid_argument, std::string(auth) + " needs both a user and a password"};
  return {};
}

std::span<const BackendScheme> backend_schemes() { return {std::begin(kSchemes), std::size(kSchemes) - 1}; }

Result<std::unique_ptr<Backend>> make_backend(std::string_view url, BackendContext& context) {
  const auto end = url.find("://");
  if (end == std::string_view::npos)
    // Not echoed: without a scheme, a password in it cannot be told apart.
    return Status(Errc::invalid_argument, "bad URL: expected SCHEME://... (this build serves: " + scheme_list() + ")");
  const std::string_view scheme = url.substr(0, end);
  for (const auto& s : backend_schemes())
    if (s.scheme == scheme) return s.make(url, context);
  return Status(Errc::invalid_argument,
                "unsupported URL scheme '" + std::string(scheme) + "' (this build serves: " + scheme_list() + ")");
}

}  // namespace dlock::detail

// Parsing of redis://, rediss://, redlock://, redis-cluster:// URLs and their
// TLS forms.
#ifndef DLOCK_REDIS_URL_HPP_
#define DLOCK_REDIS_URL_HPP_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/error.hpp"
#include "redis/keys.hpp"

namespace dlock::detail {

struct RedisEndpoint {
  bool tls = false;
  std::string host;  // name, IPv4, or IPv6 without brackets
  std::uint16_t port = 6379;
  std::string username;  // empty: the default user
  std::string password;  // empty: no AUTH
  int db = 0;
  std::string ca_file;    // rediss only; empty: the system trust store
  std::string cert_file;  // rediss only; client certificate (with key_file)
  std::string key_file;
  // redis:// and rediss:// only: WAIT mode from ?wait_replicas=N (N >= 0)
  // and ?wait_timeout_ms=MS (MS >= 1); unset when absent. They fill in
  // ClientOptions::wait_replicas / wait_timeout left at their defaults.
  std::optional<int> wait_replicas;
  std::optional<int> wait_timeout_ms;
  // redis-cluster:// and redis-sentinel:// only, from ?nat=ANNOUNCED>REACHABLE
  // (repeatable): the servers announce a node at an address this client
  // cannot reach (NAT, containers, tunnels, a proxy), so it dials REACHABLE
  // instead. Keyed by the announced "host:port" ("[v6]:port"), host in
  // lower case; TLS verifies the host dialled.
  std::map<std::string, std::pair<std::string, std::uint16_t>> nat;
  // redis-cluster:// only, from ?pubsub=auto|classic|sharded: how waiters
  // hear releases. Sharded (SSUBSCRIBE on the slot's master, Redis 7) keeps
  // each release's message on its shard; classic PUBLISH reaches every
  // node. auto (unset): sharded where the cluster knows it.
  std::string pubsub;
  // ?layout=dlock|plain|redisson: where a lock lives (keys.hpp). Not for Redlock.
  Layout layout = Layout::dlock;

  // "rediss://host:port/db" with credentials left out: safe to log.
  std::string describe() const;
};

// invalid_argument with a message naming the problem (never the password).
Result<RedisEndpoint> parse_redis_url(std::string_view url);

// True for the redlock:// and redlock+tls:// schemes.
bool is_redlock_url(std::string_view url);

// redlock://[user:pass@]h1:p1,h2:p2,...[/db][?query] (redlock+tls:// for
// TLS, with rediss://'s query parameters): one endpoint per independent
// master, in URL order, sharing credentials, db and TLS files. Requires an
// odd number >= 3 of distinct nodes. The WAIT parameters are refused: each
// master stands alone, and the majority is what survives a lost node.
Result<std::vector<RedisEndpoint>> parse_redlock_url(std::string_view url);

// True for the redis-cluster:// and redis-cluster+tls:// schemes.
bool is_cluster_url(std::string_view url);

// redis-cluster://[user:pass@]h1:p1,h2:p2,...[?query] (redis-cluster+tls://
// for TLS, with rediss://'s query parameters, and WAIT mode's): the seed
// nodes, any of which tells the slot map. A path other than /0 is refused
// (a cluster has one database); a repeated seed is dropped.
Result<std::vector<RedisEndpoint>> parse_cluster_url(std::string_view url);

// True for the redis-sentinel:// and redis-sentinel+tls:// schemes.
bool is_sentinel_url(std::string_view url);

// redis-sentinel://[user:pass@]s1[:port],s2[:port],.../mastername[/db][?query]
// (redis-sentinel+tls:// for TLS to sentinels and master alike, with
// rediss://'s query parameters, and WAIT mode's). Sentinels without a port
// listen on 26379. The credentials, db and query are the master's; the
// sentinels are asked with ?sentinel_user= and ?sentinel_password= (a
// password alone: requirepass), or without credentials.
struct SentinelSpec {
  std::vector<RedisEndpoint> sentinels;  // in URL order, repeats dropped
  std::string master_name;
  RedisEndpoint master;  // everything but host and port, which the sentinels tell
};
Result<SentinelSpec> parse_sentinel_url(std::string_view url);

}  // namespace dlock::detail

#endif  // DLOCK_REDIS_URL_HPP_

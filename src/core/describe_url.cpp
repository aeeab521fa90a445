// describe_url(): any scheme's URL with its secrets left out, for logs; and
// backend_family(): the one map of schemes to backend families.
#include <string>
#include <string_view>

#include "dlock/client.hpp"

namespace dlock {

namespace {

// "a=1&sentinel_password=x" with every *password parameter's value masked.
std::string mask_query(std::string_view query) {
  std::string out;
  bool first = true;
  for (;;) {
    const auto amp = query.find('&');
    const std::string_view kv = query.substr(0, amp);
    if (!first) out += '&';
    first = false;
    const auto eq = kv.find('=');
    if (eq != std::string_view::npos && kv.substr(0, eq).ends_with("password"))
      out += std::string(kv.substr(0, eq)) + "=***";
    else
      out += kv;
    if (amp == std::string_view::npos) return out;
    query = query.substr(amp + 1);
  }
}

}  // namespace

std::string describe_url(std::string_view url) {
  const auto scheme = url.find("://");
  if (scheme == std::string_view::npos) return std::string(url);
  const auto start = scheme + 3;
  std::string out(url.substr(0, start));
  // The authority ends at the path or the fragment; its userinfo at the
  // last '@' (a stray '?' in a password stays inside it).
  auto end = url.find_first_of("/#", start);
  if (end == std::string_view::npos) end = url.size();
  std::string_view rest = url.substr(start);
  if (const auto at = url.substr(start, end - start).rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = url.substr(start, at);
    const auto colon = userinfo.find(':');
    // A lone part is Redis's password (redis://PASSWORD@host), elsewhere
    // the user (postgres://USER@host).
    const bool redis = url.starts_with("redis") || url.starts_with("redlock");
    if (colon != std::string_view::npos)
      out += std::string(userinfo.substr(0, colon)) + ":***";
    else
      out += redis ? "***" : std::string(userinfo);
    rest = url.substr(start + at);
  }
  // The query's own secrets: libpq's password=, Sentinel's sentinel_password=.
  const auto q = rest.find('?');
  if (q == std::string_view::npos) return out + std::string(rest);
  const auto hash = rest.find('#', q);
  out += std::string(rest.substr(0, q + 1));
  out += mask_query(rest.substr(q + 1, hash == std::string_view::npos ? std::string_view::npos : hash - q - 1));
  if (hash != std::string_view::npos) out += rest.substr(hash);
  return out;
}

std::string_view backend_family(std::string_view url) {
  const auto end = url.find("://");
  if (end == std::string_view::npos) return {};
  const std::string_view scheme = url.substr(0, end);
  if (scheme == "redis" || scheme == "rediss" || scheme == "redis-cluster" || scheme == "redis-cluster+tls" ||
      scheme == "redis-sentinel" || scheme == "redis-sentinel+tls")
    return "redis";
  if (scheme == "redlock" || scheme == "redlock+tls") return "redlock";
  if (scheme == "postgres" || scheme == "postgresql") return "postgres";
  if (scheme == "sqlite") return "sqlite";
  if (scheme == "zk" || scheme == "zk+tls") return "zookeeper";
  if (scheme == "etcd" || scheme == "etcd+tls") return "etcd";
  return {};
}

}  // namespace dlock

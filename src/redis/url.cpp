#include "redis/url.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "core/url_parts.hpp"
#include "dlock/client.hpp"

namespace dlock::detail {
namespace {

Status bad(std::string what) { return {Errc::invalid_argument, "bad Redis URL: " + std::move(what)}; }

// Listed in the redis:// "unknown parameter" message; not offered by Redlock.
constexpr std::string_view kWaitParamsListed = ", wait_replicas, wait_timeout_ms, layout";
// Listed for the URLs whose servers announce other nodes.
constexpr std::string_view kNatParamListed = ", nat, pubsub";

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::string RedisEndpoint::describe() const {
  std::string out = tls ? "rediss://" : "redis://";
  if (host.find(':') != std::string::npos)
    out += "[" + host + "]";
  else
    out += host;
  out += ":" + std::to_string(port);
  if (db != 0) out += "/" + std::to_string(db);
  return out;
}

namespace {

// "user:password" or "password" (as redis-cli reads a lone part).
Status parse_userinfo(std::string_view userinfo, RedisEndpoint& ep) {
  std::string_view user = userinfo, pass;
  bool has_pass = false;
  if (auto c = userinfo.find(':'); c != std::string_view::npos) {
    user = userinfo.substr(0, c);
    pass = userinfo.substr(c + 1);
    has_pass = true;
  }
  if (!percent_decode(user, ep.username)) return bad("invalid percent-escape in the user name");
  if (!percent_decode(pass, ep.password)) return bad("invalid percent-escape in the password");
  if (!has_pass) {
    ep.password = ep.username;
    ep.username.clear();
  }
  if (!ep.username.empty() && ep.password.empty()) return bad("a user name needs a password (user:password@)");
  return {};
}

// "host", "host:port", "[v6]" or "[v6]:port".
Status parse_host_port(std::string_view rest, RedisEndpoint& ep) {
  std::string_view host = rest, port;
  if (rest.starts_with('[')) {
    auto close = rest.find(']');
    if (close == std::string_view::npos) return bad("unterminated '[' in IPv6 host");
    host = rest.substr(1, close - 1);
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return bad("unexpected text after ']'");
      port = after.substr(1);
      if (port.empty()) return bad("empty port");
    }
  } else if (auto c = rest.rfind(':'); c != std::string_view::npos) {
    host = rest.substr(0, c);
    port = rest.substr(c + 1);
    if (port.empty()) return bad("empty port");
    if (host.find(':') != std::string_view::npos) return bad("IPv6 hosts must be in brackets, e.g. [::1]:6379");
  }
  if (host.empty()) return bad("missing host");
  for (char ch : host)
    if (ch == ' ' || ch == '/' || ch == '@' || ch == '?' || ch == '#') return bad("invalid character in host");
  ep.host = std::string(host);
  if (!port.empty()) {
    unsigned p = 0;
    if (!parse_int(port, p) || p == 0 || p > 65535) return bad("port must be a number from 1 to 65535");
    ep.port = static_cast<std::uint16_t>(p);
  }
  return {};
}

// "ANNOUNCED>REACHABLE", each "host:port" or "[v6]:port".
Status parse_nat(const std::string& value, RedisEndpoint& ep) {
  const auto arrow = value.find('>');
  auto side = [&](std::string_view text, RedisEndpoint& out) -> Status {
    out.port = 0;
    if (Status s = parse_host_port(text, out); !s.ok())
      return bad("nat '" + value + "': " + s.message().substr(s.message().find(": ") + 2));
    if (out.port == 0) return bad("nat '" + value + "': each side needs a port (host:port>host:port)");
    return {};
  };
  if (arrow == std::string::npos)
    return bad("nat must be ANNOUNCED>REACHABLE, as host:port>host:port (got '" + value + "')");
  RedisEndpoint from, to;
  if (Status s = side(std::string_view(value).substr(0, arrow), from); !s.ok()) return s;
  if (Status s = side(std::string_view(value).substr(arrow + 1), to); !s.ok()) return s;
  std::string key = lower(from.host);
  key = (key.find(':') != std::string::npos ? "[" + key + "]" : key) + ":" + std::to_string(from.port);
  if (ep.nat.count(key)) return bad("nat names " + key + " twice");
  ep.nat.emplace(std::move(key), std::make_pair(std::move(to.host), to.port));
  return {};
}

// One "key=value" of the query string.
Status parse_param(std::string_view key, std::string value, RedisEndpoint& ep) {
  if (key == "nat") return parse_nat(value, ep);
  if (key == "pubsub") {
    if (value != "auto" && value != "classic" && value != "sharded")
      return bad("pubsub must be auto, classic or sharded (got '" + value + "')");
    ep.pubsub = std::move(value);
    return {};
  }
  if (key == "layout") {
    if (value == "dlock") {
      ep.layout = Layout::dlock;
    } else if (value == "plain") {
      ep.layout = Layout::plain;
    } else if (value == "redisson") {
      ep.layout = Layout::redisson;
    } else {
      return bad(
          "layout must be dlock (the default: every guarantee), plain (one string key per lock, as "
          "redis-py's Lock, npm redlock and redsync keep it) or redisson (Redisson's RLock hash), not '" +
          value + "'");
    }
    return {};
  }
  if (key == "wait_replicas") {
    int n = 0;
    if (!parse_int(value, n) || n < 0)
      return bad("wait_replicas must be a whole number of replicas, 0 or more (got '" + value + "')");
    ep.wait_replicas = n;
    return {};
  }
  if (key == "wait_timeout_ms") {
    int ms = 0;
    // WAIT with timeout 0 would block forever: not a bound.
    if (!parse_int(value, ms) || ms < 1)
      return bad("wait_timeout_ms must be a whole number of milliseconds, 1 or more (got '" + value + "')");
    ep.wait_timeout_ms = ms;
    return {};
  }
  std::string* slot = nullptr;
  if (key == "cacert")
    slot = &ep.ca_file;
  else if (key == "cert")
    slot = &ep.cert_file;
  else if (key == "key")
    slot = &ep.key_file;
  if (slot == nullptr)
    return bad("unknown parameter '" + std::string(key) + "' (known: cacert, cert, key" +
               std::string(kWaitParamsListed) + std::string(kNatParamListed) + ")");
  if (!ep.tls) return bad("parameter '" + std::string(key) + "' needs the rediss:// scheme");
  *slot = std::move(value);
  return {};
}

Status parse_query(std::string_view query, RedisEndpoint& ep) {
  std::set<std::string> seen;
  while (!query.empty()) {
    const std::string_view kv = next_param(query);
    if (kv.empty()) continue;
    auto [key, value, valued] = split_param(kv);
    if (!valued) return bad("parameter '" + key + "' needs a value");
    // A templated config that appends a second layout= would lock another
    // key than its peers: one value per parameter (nat= maps one address each).
    if (key != "nat" && !seen.insert(key).second)
      return bad("parameter '" + key + "' is given twice (the last would silently win)");
    if (Status s = parse_param(key, std::move(value), ep); !s.ok()) return s;
  }
  if (ep.cert_file.empty() != ep.key_file.empty()) return bad("'cert' and 'key' go together");
  return {};
}

}  // namespace

namespace {

// `topology`: a node of a redis-cluster:// or redis-sentinel:// URL, whose
// servers announce other nodes (so ?nat= applies).
Result<RedisEndpoint> parse_one(std::string_view url, bool topology) {
  RedisEndpoint ep;
  std::string_view rest;
  if (url.starts_with("redis://")) {
    rest = url.substr(8);
  } else if (url.starts_with("rediss://")) {
    ep.tls = true;
    rest = url.substr(9);
  } else {
    auto colon = url.find("://");
    return bad(colon == std::string_view::npos
                   ? "expected redis://host:port or rediss://host:port"
                   : "unsupported scheme '" + std::string(url.substr(0, colon)) + "' (expected redis or rediss)");
  }
  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::string_view path;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  // Credentials: the last '@' separates them, so passwords may contain '@'
  // only percent-escaped, but a stray one still parses predictably.
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    if (Status s = parse_userinfo(rest.substr(0, at), ep); !s.ok()) return s;
    rest = rest.substr(at + 1);
  }
  if (Status s = parse_host_port(rest, ep); !s.ok()) return s;
  if (!path.empty() && (!parse_int(path, ep.db) || ep.db < 0)) return bad("database must be a non-negative number");
  if (Status s = parse_query(query, ep); !s.ok()) return s;
  if (!topology && !ep.nat.empty())
    return bad(
        "parameter 'nat' applies to redis-cluster:// and redis-sentinel:// (servers that announce other "
        "nodes), not to one server");
  if (!topology && !ep.pubsub.empty())
    return bad("parameter 'pubsub' applies to redis-cluster:// (sharded pub/sub is per slot), not to one server");
  return ep;
}

}  // namespace

Result<RedisEndpoint> parse_redis_url(std::string_view url) { return parse_one(url, false); }

bool is_redlock_url(std::string_view url) { return url.starts_with("redlock://") || url.starts_with("redlock+tls://"); }

namespace {

// A list of nodes in one URL, "scheme://[user:pass@]h1:p1,h2:p2,...[/db][?query]":
// each node is parsed as the redis:// (or rediss://) URL it stands for, so
// credentials, ports, IPv6, db and TLS files follow the same rules.
// `topology`: the servers have replicas and announce other nodes (cluster,
// Sentinel), so WAIT mode and ?nat= apply; a Redlock master stands alone.
Result<std::vector<RedisEndpoint>> parse_node_list(std::string_view url, std::string_view scheme,
                                                   std::string_view tls_scheme, const std::string& what,
                                                   bool topology) {
  auto fail = [&](std::string why) {
    return Status(Errc::invalid_argument, "bad " + what + " URL: " + std::move(why));
  };
  std::string_view rest;
  bool tls = false;
  if (url.starts_with(scheme)) {
    rest = url.substr(scheme.size());
  } else if (url.starts_with(tls_scheme)) {
    tls = true;
    rest = url.substr(tls_scheme.size());
  } else {
    return fail("expected " + std::string(scheme) + "host:port,host:port,... or " + std::string(tls_scheme) + "...");
  }
  // Suffix shared by every node: "/db?query".
  std::string_view suffix;
  if (auto end = rest.find_first_of("/?"); end != std::string_view::npos) {
    suffix = rest.substr(end);
    rest = rest.substr(0, end);
  }
  // WAIT mode belongs to a master with replicas; a Redlock master stands
  // alone. Checked before the nodes so the message names the parameter.
  if (auto q = suffix.find('?'); q != std::string_view::npos && !topology) {
    std::string_view query = suffix.substr(q + 1);
    while (!query.empty()) {
      const std::string_view kv = next_param(query);
      const std::string_view key = kv.substr(0, kv.find('='));
      if (key == "layout")
        return fail(
            "parameter 'layout' applies to redis://, rediss://, redis-sentinel:// and redis-cluster://, not "
            "Redlock (its rounds keep dlock's layout)");
      if (key == "wait_replicas" || key == "wait_timeout_ms")
        return fail("parameter '" + std::string(key) +
                    "' applies to redis:// and rediss:// (one master and its replicas), not Redlock");
      if (key == "nat")
        return fail(
            "parameter 'nat' applies to redis-cluster:// and redis-sentinel://, not Redlock (the URL names "
            "every master)");
    }
  }
  std::string_view userinfo;
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    userinfo = rest.substr(0, at + 1);
    rest = rest.substr(at + 1);
  }
  std::vector<RedisEndpoint> nodes;
  std::size_t index = 0;
  while (true) {
    ++index;
    auto comma = rest.find(',');
    std::string_view host = rest.substr(0, comma);
    if (host.empty()) return fail("node " + std::to_string(index) + " is empty");
    std::string one = std::string(tls ? "rediss://" : "redis://");
    one.append(userinfo).append(host).append(suffix);
    auto ep = parse_one(one, topology);
    if (!ep.ok()) {
      std::string why = ep.status().message();
      if (auto p = why.find("bad Redis URL: "); p == 0) why = why.substr(15);
      if (auto p = why.find("the rediss:// scheme"); p != std::string::npos) why.replace(p, 20, tls_scheme);
      if (!topology)
        for (std::string_view listed : {kWaitParamsListed, kNatParamListed})
          if (auto p = why.find(listed); p != std::string::npos) why.erase(p, listed.size());
      return fail("node " + std::to_string(index) + " ('" + std::string(host) + "'): " + why);
    }
    nodes.push_back(std::move(*ep));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return nodes;
}

bool same_node(const RedisEndpoint& a, const RedisEndpoint& b) {
  return lower(a.host) == lower(b.host) && a.port == b.port;
}

}  // namespace

Result<std::vector<RedisEndpoint>> parse_redlock_url(std::string_view url) {
  auto parsed = parse_node_list(url, "redlock://", "redlock+tls://", "Redlock", false);
  if (!parsed.ok()) return parsed.status();
  std::vector<RedisEndpoint>& nodes = *parsed;
  auto fail = [](std::string what) { return Status(Errc::invalid_argument, "bad Redlock URL: " + std::move(what)); };
  for (std::size_t i = 0; i < nodes.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (same_node(nodes[i], nodes[j]))
        return fail("node " + std::to_string(j + 1) + " and node " + std::to_string(i + 1) + " are the same (" +
                    nodes[i].describe() + "): Redlock needs independent masters");
  if (nodes.size() < 3)
    return fail("Redlock needs at least 3 independent masters (got " + std::to_string(nodes.size()) +
                "); for one server use redis://");
  if (nodes.size() % 2 == 0)
    return fail("Redlock needs an odd number of masters (got " + std::to_string(nodes.size()) +
                "): an even number tolerates no more failures than one node fewer");
  return nodes;
}

bool is_cluster_url(std::string_view url) {
  return url.starts_with("redis-cluster://") || url.starts_with("redis-cluster+tls://");
}

// Seeds only: the cluster tells the rest. A repeated seed is dropped.
Result<std::vector<RedisEndpoint>> parse_cluster_url(std::string_view url) {
  auto parsed = parse_node_list(url, "redis-cluster://", "redis-cluster+tls://", "Redis Cluster", true);
  if (!parsed.ok()) return parsed.status();
  std::vector<RedisEndpoint> seeds;
  for (RedisEndpoint& ep : *parsed) {
    if (ep.db != 0)
      return Status(Errc::invalid_argument,
                    "bad Redis Cluster URL: a cluster has only database 0 (got /" + std::to_string(ep.db) + ")");
    if (std::none_of(seeds.begin(), seeds.end(), [&](const RedisEndpoint& s) { return same_node(s, ep); }))
      seeds.push_back(std::move(ep));
  }
  return seeds;
}

bool is_sentinel_url(std::string_view url) {
  return url.starts_with("redis-sentinel://") || url.starts_with("redis-sentinel+tls://");
}

// The master's name is the path's first segment; the rest of the URL is a
// node list whose "/db?query" applies to the master. Sentinels without a
// port listen on 26379.
Result<SentinelSpec> parse_sentinel_url(std::string_view url) {
  auto fail = [](std::string why) {
    return Status(Errc::invalid_argument, "bad Redis Sentinel URL: " + std::move(why));
  };
  const std::string_view scheme =
      url.starts_with("redis-sentinel+tls://") ? "redis-sentinel+tls://" : "redis-sentinel://";
  if (!url.starts_with(scheme))
    return fail("expected redis-sentinel://host:port,.../mastername or redis-sentinel+tls://...");
  std::string_view rest = url.substr(scheme.size());
  const auto query_at = rest.find('?');
  // The sentinels' own credentials come out of the query; the rest is the
  // master's.
  std::string query, sentinel_user, sentinel_password;
  if (query_at != std::string_view::npos) {
    std::string_view params = rest.substr(query_at + 1);
    while (!params.empty()) {
      const std::string_view kv = next_param(params);
      const std::string_view key = kv.substr(0, kv.find('='));
      std::string* slot = key == "sentinel_user"       ? &sentinel_user
                          : key == "sentinel_password" ? &sentinel_password
                                                       : nullptr;
      if (slot == nullptr) {
        if (!kv.empty()) query += (query.empty() ? "?" : "&") + std::string(kv);
        continue;
      }
      if (kv.find('=') == std::string_view::npos || !percent_decode(kv.substr(kv.find('=') + 1), *slot) ||
          slot->empty())
        return fail("parameter '" + std::string(key) + "' needs a value");
    }
    if (!sentinel_user.empty() && sentinel_password.empty()) return fail("sentinel_user needs sentinel_password");
  }
  rest = rest.substr(0, query_at);
  const auto slash = rest.find('/');
  if (slash == std::string_view::npos || slash + 1 == rest.size())
    return fail("the master's name is missing (redis-sentinel://host:26379/mastername)");
  const std::string_view authority = rest.substr(0, slash);
  std::string_view path = rest.substr(slash + 1);
  const auto slash2 = path.find('/');
  std::string master(path.substr(0, slash2));
  std::string rebuilt = std::string(scheme) + std::string(authority);
  if (slash2 != std::string_view::npos) rebuilt += "/" + std::string(path.substr(slash2 + 1));
  rebuilt += query;
  auto nodes = parse_node_list(rebuilt, "redis-sentinel://", "redis-sentinel+tls://", "Redis Sentinel", true);
  if (!nodes.ok()) return nodes.status();
  if (!nodes->front().pubsub.empty())
    return fail("parameter 'pubsub' applies to redis-cluster:// (sharded pub/sub is per slot), not to Sentinel");
  SentinelSpec spec;
  spec.master_name = std::move(master);
  spec.master = nodes->front();  // credentials, db, TLS files, WAIT: the master's
  spec.master.host.clear();
  spec.master.port = 0;
  // The port each node named, or Sentinel's default.
  std::string_view hosts =
      authority.substr(authority.rfind('@') == std::string_view::npos ? 0 : authority.rfind('@') + 1);
  for (RedisEndpoint ep : *nodes) {
    const std::string_view host = hosts.substr(0, hosts.find(','));
    hosts = hosts.find(',') == std::string_view::npos ? std::string_view() : hosts.substr(hosts.find(',') + 1);
    const bool explicit_port =
        host.starts_with("[") ? host.find("]:") != std::string_view::npos : host.find(':') != std::string_view::npos;
    if (!explicit_port) ep.port = 26379;
    // Sentinels take no credentials or database of the master's: their own,
    // if any, come from sentinel_user and sentinel_password.
    ep.username = sentinel_user;
    ep.password = sentinel_password;
    ep.db = 0;
    ep.wait_replicas.reset();
    ep.wait_timeout_ms.reset();
    if (std::none_of(spec.sentinels.begin(), spec.sentinels.end(),
                     [&](const RedisEndpoint& s) { return same_node(s, ep); }))
      spec.sentinels.push_back(std::move(ep));
  }
  return spec;
}

}  // namespace dlock::detail

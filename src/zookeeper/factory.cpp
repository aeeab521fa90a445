#include "zookeeper/factory.hpp"

#include "core/url_parts.hpp"
#include "zookeeper/zk_backend.hpp"

namespace dlock::zookeeper {
namespace {

Status bad(std::string what) { return {Errc::invalid_argument, "bad ZooKeeper URL: " + std::move(what)}; }

bool plain_segment(std::string_view s) {
  if (s.empty() || s == "." || s == ".." || s == "zookeeper") return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

Status parse_hosts(std::string_view list, ZkConfig& c) {
  std::vector<std::string> hosts;
  if (std::string why = detail::parse_host_list(list, 2181, hosts); !why.empty()) return bad(why);
  for (const auto& h : hosts) c.hosts += (c.hosts.empty() ? "" : ",") + h;
  return {};
}

Status parse_chroot(std::string_view path, std::string& out) {
  while (!path.empty()) {
    const auto slash = path.find('/', 1);
    const std::string_view seg = path.substr(1, slash == std::string_view::npos ? std::string_view::npos : slash - 1);
    if (!plain_segment(seg))
      return bad(
          "chroot segments must be non-empty names of letters, digits, '_', '-' and '.' (not '.', '..' "
          "or 'zookeeper')");
    out += "/" + std::string(seg);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash);
  }
  return {};
}

Status parse_params(std::string_view query, ZkConfig& c, std::string& prefix) {
  while (!query.empty()) {
    const std::string_view kv = detail::next_param(query);
    if (kv.empty()) continue;
    auto [key, value, valued] = detail::split_param(kv);
    if (!valued) return bad("parameter '" + key + "' needs a value");
    if (key == "session_timeout") {
      if (!detail::parse_duration(value, c.session_timeout) || c.session_timeout.count() <= 0)
        return bad(
            "session_timeout must be a positive duration with a unit (ms, s, m, h), at most 1h (e.g. 10s, 1500ms)");
    } else if (key == "prefix") {
      if (!plain_segment(value)) return bad("prefix must be one name of letters, digits, '_', '-' and '.'");
      prefix = value;
    } else if (key == "layout") {
      if (value == "dlock" || value == "curator") {
        c.naming = Naming::curator;
      } else if (value == "kazoo") {
        c.naming = Naming::kazoo;
      } else {
        return bad("unknown layout '" + value +
                   "' (known: dlock, the default, whose nodes Curator's InterProcessMutex shares; kazoo, whose "
                   "nodes kazoo's Lock, WriteLock and ReadLock share)");
      }
    } else if (key == "tls" || key == "ssl") {
      return bad("TLS is not available: Debian's ZooKeeper C client (3.8) is built without it");
    } else {
      return bad("unknown parameter '" + key + "' (known: session_timeout, prefix, layout)");
    }
  }
  return {};
}

}  // namespace

Result<ZkConfig> parse_zk_url(std::string_view url) {
  if (url.starts_with("zk+tls://") || url.starts_with("zks://"))
    return bad("TLS is not available: Debian's ZooKeeper C client (3.8) is built without it");
  if (!url.starts_with("zk://")) return bad("expected zk://host[:port][,host[:port]...][/chroot]");
  std::string_view rest = url.substr(5);
  ZkConfig c;
  const auto q = rest.find('?');
  const std::string_view query = q == std::string_view::npos ? std::string_view() : rest.substr(q + 1);
  rest = rest.substr(0, q);
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (path == "/") path = {};
  std::string user_desc;
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const auto colon = userinfo.find(':');
    if (colon == std::string_view::npos) return bad("digest auth needs user:password");
    if (!detail::percent_decode(userinfo.substr(0, colon), c.user)) return bad("invalid percent-escape in the user");
    if (!detail::percent_decode(userinfo.substr(colon + 1), c.password))
      return bad("invalid percent-escape in the password");
    if (c.user.empty() || c.password.empty()) return bad("digest auth needs a non-empty user and password");
    if (c.user.find(':') != std::string::npos) return bad("the user may not contain ':'");
    user_desc = c.user + "@";
  }
  if (Status s = parse_hosts(authority, c); !s.ok()) return s;
  std::string chroot, prefix = "dlock";
  if (Status s = parse_chroot(path, chroot); !s.ok()) return s;
  if (Status s = parse_params(query, c, prefix); !s.ok()) return s;
  c.base = chroot + "/" + prefix;
  c.describe = "zk://" + user_desc + c.hosts + chroot;
  return c;
}

Result<std::unique_ptr<detail::Backend>> make_from_url(std::string_view url, detail::BackendContext& context) {
  if (Status s = detail::refuse_wait_replicas(context.options, "ZooKeeper"); !s.ok()) return s;
  auto config = parse_zk_url(url);
  if (!config.ok()) return config.status();
  const ClientOptions& o = context.options;
  if (Status s = detail::take_credentials(o, config->user, config->password, "ZooKeeper digest auth"); !s.ok())
    return s;
  config->connect_timeout = o.connect_timeout;
  config->command_timeout = o.command_timeout;
  config->log = context.log;
  return make_zk_backend(context.io, std::move(*config));
}

}  // namespace dlock::zookeeper

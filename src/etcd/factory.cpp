#include "etcd/factory.hpp"

#include "core/url_parts.hpp"
#include "etcd/etcd_backend.hpp"

namespace dlock::etcd {
namespace {

Status bad(std::string what) { return {Errc::invalid_argument, "bad etcd URL: " + std::move(what)}; }

Status parse_params(std::string_view query, EtcdBackendConfig& c) {
  while (!query.empty()) {
    const std::string_view kv = detail::next_param(query);
    if (kv.empty()) continue;
    auto [key, value, valued] = detail::split_param(kv);
    if (!valued) return bad("parameter '" + key + "' needs a value");
    if (key == "session_timeout") {
      std::chrono::milliseconds t{0};
      if (!detail::parse_duration(value, t) || t.count() < 1000 || t.count() % 1000 != 0)
        return bad("session_timeout must be whole seconds with a unit, at least 1s and at most 1h (e.g. 10s)");
      c.session_ttl = std::chrono::duration_cast<std::chrono::seconds>(t);
    } else if (key == "cacert" || key == "cert" || key == "key") {
      if (!c.cluster.tls) return bad("parameter '" + key + "' needs the etcd+tls:// scheme");
      (key == "cacert" ? c.cluster.ca_file : key == "cert" ? c.cluster.cert_file : c.cluster.key_file) = value;
    } else {
      return bad("unknown parameter '" + key + "' (known: session_timeout, cacert, cert, key)");
    }
  }
  return {};
}

}  // namespace

Result<EtcdBackendConfig> parse_etcd_url(std::string_view url) {
  EtcdBackendConfig c;
  c.cluster.tls = url.starts_with("etcd+tls://");
  if (!c.cluster.tls && !url.starts_with("etcd://"))
    return bad("expected etcd://host[:port][,host[:port]...][/prefix] or etcd+tls://...");
  std::string_view rest = url.substr(c.cluster.tls ? 11 : 7);
  const auto q = rest.find('?');
  const std::string_view query = q == std::string_view::npos ? std::string_view() : rest.substr(q + 1);
  rest = rest.substr(0, q);
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  const std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  std::string user_desc;
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const auto colon = userinfo.find(':');
    if (colon == std::string_view::npos) return bad("authentication needs user:password");
    if (!detail::percent_decode(userinfo.substr(0, colon), c.cluster.user))
      return bad("invalid percent-escape in the user");
    if (!detail::percent_decode(userinfo.substr(colon + 1), c.cluster.password))
      return bad("invalid percent-escape in the password");
    if (c.cluster.user.empty() || c.cluster.password.empty())
      return bad("authentication needs a non-empty user and password");
    user_desc = c.cluster.user + "@";
  }
  if (std::string why = detail::parse_host_list(authority, 2379, c.cluster.endpoints); !why.empty()) return bad(why);
  if (!detail::percent_decode(path, c.prefix)) return bad("invalid percent-escape in the prefix");
  if (!c.prefix.empty() && c.prefix.back() != '/') c.prefix += '/';
  if (Status s = parse_params(query, c); !s.ok()) return s;
  if (c.cluster.cert_file.empty() != c.cluster.key_file.empty())
    return bad("a client certificate needs both cert and key");
  std::string hosts;
  for (const auto& e : c.cluster.endpoints) hosts += (hosts.empty() ? "" : ",") + e;
  c.describe = std::string(c.cluster.tls ? "etcd+tls://" : "etcd://") + user_desc + hosts +
               (path.empty() ? "" : "/" + std::string(path));
  return c;
}

Result<std::unique_ptr<detail::Backend>> make_from_url(std::string_view url, detail::BackendContext& context) {
  if (Status s = detail::refuse_wait_replicas(context.options, "etcd"); !s.ok()) return s;
  auto config = parse_etcd_url(url);
  if (!config.ok()) return config.status();
  const ClientOptions& o = context.options;
  if (Status s = detail::take_credentials(o, config->cluster.user, config->cluster.password, "etcd authentication");
      !s.ok())
    return s;
  config->connect_timeout = o.connect_timeout;
  config->command_timeout = o.command_timeout;
  config->log = context.log;
  return make_etcd_backend(context.io, std::move(*config));
}

}  // namespace dlock::etcd

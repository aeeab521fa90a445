#include "postgres/url.hpp"

#include <algorithm>

#include "core/url_parts.hpp"

namespace dlock::postgres {
namespace {

Status bad(std::string what) { return {Errc::invalid_argument, "bad PostgreSQL URL: " + std::move(what)}; }

constexpr std::string_view kSslModes[] = {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"};
constexpr std::string_view kPassed[] = {"sslmode", "sslrootcert", "sslcert", "sslkey", "application_name"};

Status parse_host_port(std::string_view hostport, PgConfig& c) {
  std::string host;
  std::string_view port;
  if (hostport.starts_with('[')) {
    const auto close = hostport.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in the host");
    host = hostport.substr(1, close - 1);
    std::string_view rest = hostport.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return bad("expected ':PORT' after ']'");
    if (!rest.empty()) port = rest.substr(1);
  } else {
    const auto colon = hostport.rfind(':');
    host = hostport.substr(0, colon);
    if (colon != std::string_view::npos) port = hostport.substr(colon + 1);
  }
  if (host.empty()) return bad("missing host");
  set_param(c, "host", host);
  if (!port.empty()) {
    int p = 0;
    if (!detail::parse_int(port, p) || p < 1 || p > 65535) return bad("port must be 1-65535");
    set_param(c, "port", std::string(port));
  }
  return {};
}

Status parse_params(std::string_view query, PgUrl& config) {
  while (!query.empty()) {
    const std::string_view kv = detail::next_param(query);
    if (kv.empty()) continue;
    auto [key, value, valued] = detail::split_param(kv);
    if (!valued) return bad("parameter '" + key + "' needs a value");
    if (key == "table") {
      if (!valid_table_name(value)) return bad("table must be a lower-case SQL name of at most 40 characters");
      config.table.table = value;
    } else if (key == "schema") {
      if (!valid_table_name(value)) return bad("schema must be a lower-case SQL name of at most 40 characters");
      config.table.schema = value;
    } else if (std::find(std::begin(kPassed), std::end(kPassed), key) != std::end(kPassed)) {
      if (key == "sslmode" && std::find(std::begin(kSslModes), std::end(kSslModes), value) == std::end(kSslModes))
        return bad("sslmode must be disable, allow, prefer, require, verify-ca or verify-full");
      set_param(config.connection, key, value);
    } else {
      return bad("unknown parameter '" + key +
                 "' (known: table, schema, sslmode, sslrootcert, sslcert, sslkey, "
                 "application_name)");
    }
  }
  return {};
}

}  // namespace

void set_param(PgConfig& c, const std::string& key, std::string value) {
  for (auto& [k, v] : c.params)
    if (k == key) {
      v = std::move(value);
      return;
    }
  c.params.emplace_back(key, std::move(value));
}

Result<PgUrl> parse_postgres_url(std::string_view url) {
  std::string_view rest;
  for (std::string_view scheme : {"postgres://", "postgresql://"})
    if (url.starts_with(scheme)) rest = url.substr(scheme.size());
  if (rest.data() == nullptr || rest.empty()) return bad("expected postgres://[user[:password]@]host[:port][/db]");
  PgUrl config;
  config.connection.params = {{"dbname", "postgres"}, {"client_encoding", "UTF8"}};
  const auto q = rest.find('?');
  const std::string_view query = q == std::string_view::npos ? std::string_view() : rest.substr(q + 1);
  rest = rest.substr(0, q);
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos && slash + 1 < rest.size()) {
    std::string db;
    if (!detail::percent_decode(rest.substr(slash + 1), db)) return bad("invalid percent-escape in the database");
    set_param(config.connection, "dbname", db);
  }
  std::string user = "postgres";
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const auto colon = userinfo.find(':');
    std::string password;
    if (!detail::percent_decode(userinfo.substr(0, colon), user)) return bad("invalid percent-escape in the user");
    if (colon != std::string_view::npos) {
      if (!detail::percent_decode(userinfo.substr(colon + 1), password))
        return bad("invalid percent-escape in the password");
      set_param(config.connection, "password", password);
    }
  }
  set_param(config.connection, "user", user);
  if (Status s = parse_host_port(authority, config.connection); !s.ok()) return s;
  if (Status s = parse_params(query, config); !s.ok()) return s;
  std::string describe = "postgres://" + user + "@";
  for (const auto& [k, v] : config.connection.params)
    if (k == "host") describe += v.find(':') != std::string::npos ? "[" + v + "]" : v;
  for (const auto& [k, v] : config.connection.params)
    if (k == "port") describe += ":" + v;
  for (const auto& [k, v] : config.connection.params)
    if (k == "dbname") describe += "/" + v;
  config.connection.describe = describe;
  return config;
}

}  // namespace dlock::postgres

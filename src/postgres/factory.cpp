#include "postgres/factory.hpp"

#include "postgres/url.hpp"

namespace dlock::postgres {

Result<std::unique_ptr<detail::Backend>> make_from_url(std::string_view url, detail::BackendContext& context) {
  if (Status s = detail::refuse_wait_replicas(context.options, "PostgreSQL"); !s.ok()) return s;
  auto target = parse_postgres_url(url);
  if (!target.ok()) return target.status();
  PgBackendConfig config;
  config.connection = std::move(target->connection);
  config.table = std::move(target->table);
  const ClientOptions& o = context.options;
  // ClientOptions' credentials win over the URL's, so secrets need not
  // appear in URLs.
  if (!o.username.empty()) set_param(config.connection, "user", o.username);
  if (!o.password.empty()) set_param(config.connection, "password", o.password);
  config.connection.connect_timeout = o.connect_timeout;
  config.connection.command_timeout = o.command_timeout;
  config.backoff_min = o.reconnect_backoff_min;
  config.backoff_max = o.reconnect_backoff_max;
  config.log = context.log;
  config.connection.log = context.log;
  return make_pg_backend(context.io, std::move(config));
}

}  // namespace dlock::postgres

// The PostgreSQL URL schemes for the backend registry:
// postgres://[user[:password]@]host[:port][/db][?param=value&...] (also
// postgresql://). Parameters: libpq's sslmode, sslrootcert, sslcert, sslkey,
// application_name; dlock's table (default dlock_locks) and the schema it
// lives in (default public; never found through search_path).
#ifndef DLOCK_POSTGRES_FACTORY_HPP_
#define DLOCK_POSTGRES_FACTORY_HPP_

#include "backend_registry.hpp"
#include "postgres/pg_backend.hpp"

namespace dlock::postgres {

// invalid_argument naming the bad part.
Result<PgBackendConfig> parse_postgres_url(std::string_view url);

Result<std::unique_ptr<detail::Backend>> make_from_url(std::string_view url, detail::BackendContext& context);

}  // namespace dlock::postgres

#endif  // DLOCK_POSTGRES_FACTORY_HPP_

// postgres://[user[:password]@]host[:port][/db][?param=value&...] (also
// postgresql://). Parameters: libpq's sslmode, sslrootcert, sslcert, sslkey,
// application_name; dlock's table (default dlock_locks) and the schema it
// lives in (default public; never found through search_path). Part of the
// database layer the backend and dlock::tx share.
#ifndef DLOCK_POSTGRES_URL_HPP_
#define DLOCK_POSTGRES_URL_HPP_

#include <string>
#include <string_view>

#include "dlock/error.hpp"
#include "postgres/pg_connection.hpp"
#include "postgres/table_name.hpp"

namespace dlock::postgres {

// What a URL names: the server and how to reach it, and dlock's table.
struct PgUrl {
  PgConfig connection;
  TableName table;
};

// invalid_argument naming the bad part.
Result<PgUrl> parse_postgres_url(std::string_view url);

// Sets libpq's `key` (replacing any value it had).
void set_param(PgConfig& c, const std::string& key, std::string value);

}  // namespace dlock::postgres

#endif  // DLOCK_POSTGRES_URL_HPP_

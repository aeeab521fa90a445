// The PostgreSQL backend: a row per held lock with a server-computed expiry
// (renewed by the watchdog, one statement per tick for every hold), fences
// from a sequence, releases announced by NOTIFY to a LISTENing connection.
#ifndef DLOCK_POSTGRES_PG_BACKEND_HPP_
#define DLOCK_POSTGRES_PG_BACKEND_HPP_

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>

#include "backend.hpp"
#include "postgres/pg_connection.hpp"
#include "postgres/schema.hpp"

namespace dlock::postgres {

struct PgBackendConfig {
  PgConfig connection;
  TableName table;                                                // public.dlock_locks unless the URL says otherwise
  std::chrono::milliseconds backoff_min{100}, backoff_max{5000};  // the LISTEN connection's reconnects
  std::function<void(LogLevel, std::string_view)> log;
};

std::unique_ptr<detail::Backend> make_pg_backend(boost::asio::io_context& io, PgBackendConfig config);

}  // namespace dlock::postgres

#endif  // DLOCK_POSTGRES_PG_BACKEND_HPP_

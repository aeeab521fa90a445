// The PL/pgSQL of the lock table, src/postgres/schema.sql (embedded at
// build time by cmake/dlockEmbedText.cmake). schema.hpp hands it out with
// the table's name filled in.
#ifndef DLOCK_POSTGRES_SQL_HPP_
#define DLOCK_POSTGRES_SQL_HPP_

#include <string_view>

namespace dlock::postgres::sql {

extern const std::string_view schema;

}  // namespace dlock::postgres::sql

#endif  // DLOCK_POSTGRES_SQL_HPP_

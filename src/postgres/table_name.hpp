// The schema-qualified name of dlock's lock table in PostgreSQL.
#ifndef DLOCK_POSTGRES_TABLE_NAME_HPP_
#define DLOCK_POSTGRES_TABLE_NAME_HPP_

#include <string>

namespace dlock::postgres {

struct TableName {
  std::string schema = "public";
  std::string table = "dlock_locks";
  std::string qualified() const;  // schema.table
};

// A lower-case SQL identifier of at most 40 characters (room for suffixes).
bool valid_table_name(const std::string& table);

}  // namespace dlock::postgres

#endif  // DLOCK_POSTGRES_TABLE_NAME_HPP_

// The seed's database table locks (seed 003), on PostgreSQL, as written
// there: a row in a table with a unique name is the lock.
//   db-insert-unique       INSERT the name (a unique-key violation means
//                          "taken": retry every 10 ms), DELETE it to unlock.
//                          A holder that dies never unlocks.
//   db-insert-cleanup-job  the same, plus the article's patch: the row
//                          records its creation time (the client's wall
//                          clock) and a periodic job deletes rows older than
//                          the timeout, whether or not their holder is done.
// The verifier creates the table (kNaiveTableSql) before the workers start.
#ifndef DLOCK_TORTURE_STRATEGIES_SQL_HPP_
#define DLOCK_TORTURE_STRATEGIES_SQL_HPP_

#include <memory>
#include <string>

#include "strategies.hpp"

namespace torture {

extern const char* const kNaiveTableSql;

// `name` is "db-insert-unique" or "db-insert-cleanup-job".
std::unique_ptr<Strategy> make_table_lock(const std::string& name, const StrategyConfig& config);

}  // namespace torture

#endif  // DLOCK_TORTURE_STRATEGIES_SQL_HPP_

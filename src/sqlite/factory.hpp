// The SQLite backend's URL scheme for the backend registry:
// sqlite:///absolute/path/locks.db[?busy_timeout_ms=N].
#ifndef DLOCK_SQLITE_FACTORY_HPP_
#define DLOCK_SQLITE_FACTORY_HPP_

#include "backend_registry.hpp"
#include "sqlite/sqlite_backend.hpp"

namespace dlock::sqlite {

// The file and settings a sqlite:// URL names, or invalid_argument naming
// the bad part.
Result<SqliteConfig> parse_sqlite_url(std::string_view url);

Result<std::unique_ptr<detail::Backend>> make_from_url(std::string_view url, detail::BackendContext& context);

}  // namespace dlock::sqlite

#endif  // DLOCK_SQLITE_FACTORY_HPP_

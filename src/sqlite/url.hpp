// sqlite:///absolute/path/locks.db[?busy_timeout_ms=N]. Part of the
// database layer the backend and dlock::tx share.
#ifndef DLOCK_SQLITE_URL_HPP_
#define DLOCK_SQLITE_URL_HPP_

#include <chrono>
#include <string>
#include <string_view>

#include "dlock/error.hpp"

namespace dlock::sqlite {

struct SqliteUrl {
  std::string path;                      // absolute, each run of slashes one
  std::chrono::milliseconds busy{5000};  // busy_timeout_ms
};

// The file and settings a sqlite:// URL names, or invalid_argument naming
// the bad part.
Result<SqliteUrl> parse_sqlite_url(std::string_view url);

}  // namespace dlock::sqlite

#endif  // DLOCK_SQLITE_URL_HPP_

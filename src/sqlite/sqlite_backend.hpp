// The SQLite backend: locks as rows of a table in one file, shared by every
// process on this host (sqlite:///path/locks.db). Leases on the host's boot
// clock; a holder that dies frees its locks at once; waiters are woken by a
// release within milliseconds, without polling.
#ifndef DLOCK_SQLITE_SQLITE_BACKEND_HPP_
#define DLOCK_SQLITE_SQLITE_BACKEND_HPP_

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "backend.hpp"

namespace dlock::sqlite {

struct SqliteConfig {
  std::string path;                      // absolute path of the database file
  std::chrono::milliseconds busy{5000};  // a release or renewal waits this long for another process's write lock
  std::function<void(LogLevel, std::string_view)> log;
};

std::unique_ptr<detail::Backend> make_sqlite_backend(boost::asio::io_context& io, SqliteConfig config);

}  // namespace dlock::sqlite

#endif  // DLOCK_SQLITE_SQLITE_BACKEND_HPP_

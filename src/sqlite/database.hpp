// A thin RAII layer over the sqlite3 C API: a connection, prepared
// statements, and errors as Status with SQLite's extended result code as the
// backend code. Single-threaded: each Database is used by one thread.
#ifndef DLOCK_SQLITE_DATABASE_HPP_
#define DLOCK_SQLITE_DATABASE_HPP_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/error.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace dlock::sqlite {

class Database;

// A prepared statement, reset (bindings kept until rebound) at each run.
class Statement {
 public:
  Statement() = default;
  Statement(Statement&&) noexcept;
  Statement& operator=(Statement&&) noexcept;
  ~Statement();

  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, std::string_view value);
  Statement& bind_null(int index);
  // true: a row is there to read; false: done. Errors as Status.
  Result<bool> step();
  // Runs to completion (a write).
  Status run();
  std::int64_t int64(int column) const;
  std::string text(int column) const;
  bool is_null(int column) const;
  void reset();

 private:
  friend class Database;
  Statement(Database* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Database* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

class Database {
 public:
  // Opens the file read-write, creating it unless `create` is false (then a
  // missing file fails to open); `busy` bounds how long a statement waits
  // for another connection's write lock.
  static Result<std::unique_ptr<Database>> open(const std::string& path, std::chrono::milliseconds busy,
                                                bool create = true);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  Status exec(const char* sql);
  // exec, tried again while another connection holds a lock in a way that
  // skips the busy handler (a journal-mode change, WAL recovery), for up to
  // the busy limit.
  Status exec_retrying(const char* sql);
  Result<Statement> prepare(std::string_view sql);
  // The Status for result code `rc` of `what`, from the connection's error.
  Status error(int rc, std::string_view what) const;
  std::int64_t changes() const;
  // The file this connection opened is no longer at its path: deleted,
  // renamed, or replaced by another file (SQLITE_FCNTL_HAS_MOVED compares
  // the open file's inode with the path's).
  bool has_moved() const;

  // For the busy handler: when this wait began (try 0 starts it), and how
  // long one may last.
  std::chrono::steady_clock::time_point busy_since(int tries) const;
  std::chrono::milliseconds busy_limit() const { return busy_; }
  void set_busy_limit(std::chrono::milliseconds busy) { busy_ = busy; }

 private:
  Database(sqlite3* db, std::chrono::milliseconds busy) : db_(db), busy_(busy) {}
  sqlite3* db_;
  std::chrono::milliseconds busy_;
  mutable std::chrono::steady_clock::time_point busy_start_;
};

// BEGIN IMMEDIATE (the write lock first, so the busy handler applies and no
// read-then-write deadlock can happen); rolled back unless committed.
class WriteTransaction {
 public:
  explicit WriteTransaction(Database& db) : db_(db) {}
  ~WriteTransaction();
  Status begin();
  Status commit();

 private:
  Database& db_;
  bool open_ = false;
};

}  // namespace dlock::sqlite

#endif  // DLOCK_SQLITE_DATABASE_HPP_

#include "sqlite/database.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <thread>
#include <utility>

namespace dlock::sqlite {
namespace {

// What the caller should do next, by SQLite's primary result code.
Errc errc_for(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Errc::unavailable;  // another connection kept the write lock past busy_timeout
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return Errc::permission_denied;
    case SQLITE_NOTADB:
      return Errc::wrong_type;  // the file holds something else
    case SQLITE_CANTOPEN:
    case SQLITE_CORRUPT:
    case SQLITE_FULL:
    case SQLITE_IOERR:
    default:
      return Errc::server_error;
  }
}

// SQLite's own busy handler sleeps up to 100 ms between tries; dlock's
// transactions hold the write lock for microseconds, so tries start at
// 50 us and back off to 2 ms, until `busy` has passed.
int on_busy(void* arg, int tries) {
  const auto* db = static_cast<const Database*>(arg);
  const auto waited = std::chrono::steady_clock::now() - db->busy_since(tries);
  if (waited >= db->busy_limit()) return 0;
  const auto pause = std::chrono::microseconds(50) * (1 << std::min(tries, 5));
  std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, std::chrono::milliseconds(2)));
  return 1;
}

}  // namespace

std::chrono::steady_clock::time_point Database::busy_since(int tries) const {
  if (tries == 0) busy_start_ = std::chrono::steady_clock::now();
  return busy_start_;
}

Statement::Statement(Statement&& o) noexcept : db_(o.db_), stmt_(std::exchange(o.stmt_, nullptr)) {}
Statement& Statement::operator=(Statement&& o) noexcept {
  if (this != &o) {
    sqlite3_finalize(stmt_);
    db_ = o.db_;
    stmt_ = std::exchange(o.stmt_, nullptr);
  }
  return *this;
}
Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int index, std::int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
Statement& Statement::bind(int index, std::string_view value) {
  // An empty view may have no data: text still, never NULL.
  sqlite3_bind_text(stmt_, index, value.data() != nullptr ? value.data() : "", static_cast<int>(value.size()),
                    SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::bind_null(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

Result<bool> Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Status s = db_->error(rc, "statement");
  sqlite3_reset(stmt_);
  return s;
}

Status Statement::run() {
  auto r = step();
  reset();
  return r.ok() ? Status() : r.status();
}

std::int64_t Statement::int64(int column) const { return sqlite3_column_int64(stmt_, column); }
std::string Statement::text(int column) const {
  const auto* p = sqlite3_column_text(stmt_, column);
  return p ? std::string(reinterpret_cast<const char*>(p),
                         static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)))
           : std::string();
}
bool Statement::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
void Statement::reset() { sqlite3_reset(stmt_); }

Result<std::unique_ptr<Database>> Database::open(const std::string& path, std::chrono::milliseconds busy, bool create) {
  sqlite3* raw = nullptr;
  // NOMUTEX: one thread uses a connection. The VFS opens files O_CLOEXEC, so
  // a command that `dlock run` starts inherits none of them.
  const int rc = sqlite3_open_v2(
      path.c_str(), &raw, SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX, nullptr);
  std::unique_ptr<Database> db(new Database(raw, busy));
  if (rc != SQLITE_OK) return db->error(rc, "cannot open " + path);
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_handler(raw, on_busy, db.get());
  return db;
}

Database::~Database() { sqlite3_close_v2(db_); }

Status Database::exec_retrying(const char* sql) {
  const auto until = std::chrono::steady_clock::now() + busy_;
  for (int tries = 0;; ++tries) {
    Status s = exec(sql);
    if (s.ok() || s.code() != Errc::unavailable || std::chrono::steady_clock::now() >= until) return s;
    (void)on_busy(this, tries);
  }
}

Status Database::exec(const char* sql) {
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? Status() : error(rc, "statement");
}

Result<Statement> Database::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc =
      sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) return error(rc, "prepare");
  return Statement(this, stmt);
}

Status Database::error(int rc, std::string_view what) const {
  std::string msg = "sqlite: " + std::string(what) + ": ";
  msg += db_ != nullptr && sqlite3_errcode(db_) == rc ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  return {errc_for(rc), std::move(msg), std::to_string(rc)};
}

std::int64_t Database::changes() const { return sqlite3_changes64(db_); }

bool Database::has_moved() const {
  int moved = 0;
  // An error (no such control in this VFS) leaves moved 0: nothing known.
  (void)sqlite3_file_control(db_, "main", SQLITE_FCNTL_HAS_MOVED, &moved);
  return moved != 0;
}

WriteTransaction::~WriteTransaction() {
  if (open_) (void)db_.exec("ROLLBACK");
}
Status WriteTransaction::begin() {
  Status s = db_.exec_retrying("BEGIN IMMEDIATE");
  open_ = s.ok();
  return s;
}
Status WriteTransaction::commit() {
  Status s = db_.exec("COMMIT");
  if (s.ok()) open_ = false;
  return s;
}

}  // namespace dlock::sqlite

// The participant-side barrier on SQLite (see sqlite_barrier in tx.hpp):
// barrier_rule over a write transaction on the participant's connection.
#include <sqlite3.h>

#include "dlock/tx.hpp"
#include "tx/barrier_rule.hpp"

namespace dlock::tx {
namespace {

constexpr const char* kBarrierTable =
    "CREATE TABLE IF NOT EXISTS dlock_tx_barrier (gid TEXT NOT NULL, branch INTEGER NOT NULL, op TEXT NOT NULL, "
    "PRIMARY KEY (gid, branch, op)) WITHOUT ROWID";

// Inserts the barrier row (gid, branch, op) unless it is there; 1 if it was
// inserted, 0 if it was there, -1 on an error.
int insert_row(sqlite3* db, const BranchContext& ctx, Op op) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, "INSERT OR IGNORE INTO dlock_tx_barrier (gid, branch, op) VALUES (?1, ?2, ?3)", -1, &stmt,
                         nullptr) != SQLITE_OK)
    return -1;
  const std::string_view name = to_string(op);
  sqlite3_bind_text(stmt, 1, ctx.gid.data(), static_cast<int>(ctx.gid.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int(stmt, 2, ctx.branch);
  sqlite3_bind_text(stmt, 3, name.data(), static_cast<int>(name.size()), SQLITE_STATIC);
  const int rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return -1;
  return sqlite3_changes(db) > 0 ? 1 : 0;
}

// Rolls back unless committed.
class Transaction {
 public:
  Transaction(sqlite3* db, const BranchContext& ctx) : db_(db), ctx_(ctx) {}
  ~Transaction() {
    if (open_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  bool begin() { return open_ = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK; }
  bool commit() {
    if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) return false;
    open_ = false;
    return true;
  }
  int insert(Op op) { return insert_row(db_, ctx_, op); }

 private:
  sqlite3* db_;
  const BranchContext& ctx_;
  bool open_ = false;
};

}  // namespace

Outcome sqlite_barrier(sqlite3* db, const BranchContext& context, const std::function<Outcome(sqlite3*)>& work) {
  // Errors of the barrier's own statements (busy, I/O) are unknown.
  if (db == nullptr || sqlite3_get_autocommit(db) == 0) return Outcome::unknown;
  if (sqlite3_exec(db, kBarrierTable, nullptr, nullptr, nullptr) != SQLITE_OK) return Outcome::unknown;
  Transaction tx(db, context);
  if (!tx.begin()) return Outcome::unknown;
  return detail::barrier_rule(tx, context.op, [&] { return work(db); });
}

}  // namespace dlock::tx

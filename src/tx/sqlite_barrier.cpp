// The participant-side barrier on SQLite (see sqlite_barrier in tx.hpp):
// idempotency, empty compensation and anti-suspension decided by inserts
// into a table keyed (gid, branch, op), in the same write transaction as the
// participant's own work.
#include <sqlite3.h>

#include "dlock/tx.hpp"

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
  explicit Transaction(sqlite3* db) : db_(db) {}
  ~Transaction() {
    if (open_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  bool begin() { return open_ = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK; }
  bool commit() {
    if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) return false;
    open_ = false;
    return true;
  }

 private:
  sqlite3* db_;
  bool open_ = false;
};

}  // namespace

Outcome sqlite_barrier(sqlite3* db, const BranchContext& context, const std::function<Outcome(sqlite3*)>& work) {
  // Any error of the barrier's own statements (busy, I/O) leaves nothing
  // done and is an unknown outcome: the coordinator asks again.
  if (db == nullptr || sqlite3_get_autocommit(db) == 0) return Outcome::unknown;
  if (sqlite3_exec(db, kBarrierTable, nullptr, nullptr, nullptr) != SQLITE_OK) return Outcome::unknown;
  Transaction tx(db);
  if (!tx.begin()) return Outcome::unknown;
  // A Cancel first takes the Try's place: if the Try's row was not there,
  // the Try never took effect (empty compensation) and now never will.
  int origin = 0;
  if (context.op == Op::cancel && (origin = insert_row(db, context, Op::try_)) < 0) return Outcome::unknown;
  const int current = insert_row(db, context, context.op);
  if (current < 0) return Outcome::unknown;
  if (origin == 1 || current == 0) return tx.commit() ? Outcome::success : Outcome::unknown;
  Outcome outcome = Outcome::unknown;
  try {
    outcome = work(db);
  } catch (...) {
    outcome = Outcome::unknown;
  }
  if (outcome != Outcome::success) return outcome;  // rolled back, barrier row included
  return tx.commit() ? Outcome::success : Outcome::unknown;
}

}  // namespace dlock::tx

// The participant-side barrier on PostgreSQL (see pg_barrier in tx.hpp):
// the same rules as the SQLite one, decided by INSERT ... ON CONFLICT DO
// NOTHING in the participant's own transaction on its own connection.
#include <libpq-fe.h>

#include <string>

#include "dlock/tx.hpp"

namespace dlock::tx {
namespace {

constexpr const char* kBarrierTable =
    "CREATE TABLE IF NOT EXISTS dlock_tx_barrier (gid text NOT NULL, branch int NOT NULL, op text NOT NULL, "
    "PRIMARY KEY (gid, branch, op))";

bool exec_ok(pg_conn* conn, const char* sql) {
  PGresult* r = PQexec(conn, sql);
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  return ok;
}

// Inserts the barrier row (gid, branch, op) unless it is there; 1 if it was
// inserted, 0 if it was there, -1 on an error.
int insert_row(pg_conn* conn, const BranchContext& ctx, Op op) {
  const std::string branch = std::to_string(ctx.branch);
  const std::string name(to_string(op));
  const char* values[] = {ctx.gid.c_str(), branch.c_str(), name.c_str()};
  PGresult* r = PQexecParams(conn,
                             "INSERT INTO dlock_tx_barrier (gid, branch, op) VALUES ($1, $2::int, $3) ON CONFLICT "
                             "DO NOTHING",
                             3, nullptr, values, nullptr, nullptr, 0);
  int out = -1;
  if (PQresultStatus(r) == PGRES_COMMAND_OK) out = std::string(PQcmdTuples(r)) == "1" ? 1 : 0;
  PQclear(r);
  return out;
}

// Rolls back unless committed.
class Transaction {
 public:
  explicit Transaction(pg_conn* conn) : conn_(conn) {}
  ~Transaction() {
    if (open_) (void)exec_ok(conn_, "ROLLBACK");
  }
  bool begin() { return open_ = exec_ok(conn_, "BEGIN"); }
  bool commit() {
    open_ = false;  // COMMIT ends it whatever it answers
    return exec_ok(conn_, "COMMIT");
  }

 private:
  pg_conn* conn_;
  bool open_ = false;
};

}  // namespace

Outcome pg_barrier(pg_conn* conn, const BranchContext& context, const std::function<Outcome(pg_conn*)>& work) {
  // Any error of the barrier's own statements leaves nothing done and is an
  // unknown outcome: the coordinator asks again.
  if (conn == nullptr || PQtransactionStatus(conn) != PQTRANS_IDLE) return Outcome::unknown;
  if (!exec_ok(conn, kBarrierTable)) return Outcome::unknown;  // e.g. two first calls at once: asked again
  Transaction tx(conn);
  if (!tx.begin()) return Outcome::unknown;
  int origin = 0;
  if (context.op == Op::cancel && (origin = insert_row(conn, context, Op::try_)) < 0) return Outcome::unknown;
  const int current = insert_row(conn, context, context.op);
  if (current < 0) return Outcome::unknown;
  if (origin == 1 || current == 0) return tx.commit() ? Outcome::success : Outcome::unknown;
  Outcome outcome = Outcome::unknown;
  try {
    outcome = work(conn);
  } catch (...) {
    outcome = Outcome::unknown;
  }
  if (outcome != Outcome::success) return outcome;                            // rolled back, barrier row included
  if (PQtransactionStatus(conn) != PQTRANS_INTRANS) return Outcome::failure;  // a statement failed, or it committed
  return tx.commit() ? Outcome::success : Outcome::unknown;
}

}  // namespace dlock::tx

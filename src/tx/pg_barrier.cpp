// The participant-side barrier on PostgreSQL (see pg_barrier in tx.hpp):
// barrier_rule over a transaction on the participant's own connection, its
// rows inserted by INSERT ... ON CONFLICT DO NOTHING.
#include <libpq-fe.h>

#include <string>

#include "dlock/tx.hpp"
#include "tx/barrier_rule.hpp"

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
  Transaction(pg_conn* conn, const BranchContext& ctx) : conn_(conn), ctx_(ctx) {}
  ~Transaction() {
    if (open_) (void)exec_ok(conn_, "ROLLBACK");
  }
  bool begin() { return open_ = exec_ok(conn_, "BEGIN"); }
  bool commit() {
    open_ = false;  // COMMIT ends it whatever it answers
    return exec_ok(conn_, "COMMIT");
  }
  int insert(Op op) { return insert_row(conn_, ctx_, op); }

 private:
  pg_conn* conn_;
  const BranchContext& ctx_;
  bool open_ = false;
};

}  // namespace

Outcome pg_barrier(pg_conn* conn, const BranchContext& context, const std::function<Outcome(pg_conn*)>& work) {
  // Errors of the barrier's own statements are unknown.
  if (conn == nullptr || PQtransactionStatus(conn) != PQTRANS_IDLE) return Outcome::unknown;
  if (!exec_ok(conn, kBarrierTable)) return Outcome::unknown;  // e.g. two first calls at once: asked again
  Transaction tx(conn, context);
  if (!tx.begin()) return Outcome::unknown;
  return detail::barrier_rule(tx, context.op, [&] {
    const Outcome o = work(conn);
    // A failed statement aborted the transaction, or the work committed it:
    // success would commit nothing it claims.
    if (o == Outcome::success && PQtransactionStatus(conn) != PQTRANS_INTRANS) return Outcome::failure;
    return o;
  });
}

}  // namespace dlock::tx

// The participant-side barrier on PostgreSQL (see pg_barrier in tx.hpp):
// barrier_rule over a transaction on the participant's own connection, its
// rows inserted by INSERT ... ON CONFLICT DO NOTHING.
#include <libpq-fe.h>

#include <mutex>
#include <set>
#include <string>

#include "dlock/tx.hpp"
#include "tx/barrier_rule.hpp"

namespace dlock::tx {
namespace {

// One round trip, and no NOTICE on the participant's connection when the
// table is there already.
constexpr const char* kBarrierTable =
    "BEGIN; SET LOCAL client_min_messages = warning; CREATE TABLE IF NOT EXISTS dlock_tx_barrier (gid text NOT "
    "NULL, branch int NOT NULL, op text NOT NULL, PRIMARY KEY (gid, branch, op)); COMMIT";
constexpr const char* kUndefinedTable = "42P01";

bool exec_ok(pg_conn* conn, const char* sql) {
  PGresult* r = PQexec(conn, sql);
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  return ok;
}

// The databases (server, database, user) where the table is known to be:
// the check is made once per process, not on every call. A table dropped
// since is found by the insert failing, which forgets the database here.
class TablesMade {
 public:
  static std::string key(pg_conn* c) {
    auto s = [](const char* v) { return std::string(v ? v : ""); };
    return s(PQhost(c)) + ":" + s(PQport(c)) + "/" + s(PQdb(c)) + "@" + s(PQuser(c));
  }
  bool ensure(pg_conn* conn) {
    const std::string k = key(conn);
    {
      std::lock_guard lock(mu_);
      if (made_.contains(k)) return true;
    }
    if (!exec_ok(conn, kBarrierTable)) {  // e.g. two first calls at once: asked again
      if (PQtransactionStatus(conn) != PQTRANS_IDLE) (void)exec_ok(conn, "ROLLBACK");
      return false;
    }
    std::lock_guard lock(mu_);
    made_.insert(k);
    return true;
  }
  void forget(pg_conn* conn) {
    std::lock_guard lock(mu_);
    made_.erase(key(conn));
  }

 private:
  std::mutex mu_;
  std::set<std::string> made_;
};
TablesMade& tables_made() {
  static TablesMade* t = new TablesMade;  // never destroyed: calls may outlive static destruction
  return *t;
}

// Inserts the barrier row (gid, branch, op) unless it is there, after
// `prefix` (statements sent in the same round trip); 1 if it was inserted,
// 0 if it was there, -1 on an error.
int insert_row(pg_conn* conn, const BranchContext& ctx, Op op, const char* prefix) {
  char* gid = PQescapeLiteral(conn, ctx.gid.data(), ctx.gid.size());
  if (gid == nullptr) return -1;
  const std::string sql = std::string(prefix) + "INSERT INTO dlock_tx_barrier (gid, branch, op) VALUES (" + gid + ", " +
                          std::to_string(ctx.branch) + ", '" + std::string(to_string(op)) + "') ON CONFLICT DO NOTHING";
  PQfreemem(gid);
  // Several statements in one string: the simple query protocol, whose
  // result is the last statement's (or the first error's).
  PGresult* r = PQexec(conn, sql.c_str());
  int out = -1;
  if (PQresultStatus(r) == PGRES_COMMAND_OK) out = std::string(PQcmdTuples(r)) == "1" ? 1 : 0;
  const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  if (state != nullptr && std::string(state) == kUndefinedTable) tables_made().forget(conn);
  PQclear(r);
  return out;
}

// Rolls back unless committed. BEGIN goes out with the first insert: one
// round trip fewer per call.
class Transaction {
 public:
  Transaction(pg_conn* conn, const BranchContext& ctx) : conn_(conn), ctx_(ctx) {}
  ~Transaction() {
    if (PQtransactionStatus(conn_) != PQTRANS_IDLE) (void)exec_ok(conn_, "ROLLBACK");
  }
  bool commit() { return exec_ok(conn_, "COMMIT"); }
  int insert(Op op) {
    const char* prefix = begun_ ? "" : "BEGIN; ";
    begun_ = true;
    return insert_row(conn_, ctx_, op, prefix);
  }

 private:
  pg_conn* conn_;
  const BranchContext& ctx_;
  bool begun_ = false;
};

}  // namespace

Outcome pg_barrier(pg_conn* conn, const BranchContext& context, const std::function<Outcome(pg_conn*)>& work) {
  // Errors of the barrier's own statements are unknown.
  if (conn == nullptr || PQtransactionStatus(conn) != PQTRANS_IDLE) return Outcome::unknown;
  if (!tables_made().ensure(conn)) return Outcome::unknown;
  Transaction tx(conn, context);
  return detail::barrier_rule(tx, context.op, [&] {
    const Outcome o = work(conn);
    // A failed statement aborted the transaction, or the work committed it:
    // success would commit nothing it claims.
    if (o == Outcome::success && PQtransactionStatus(conn) != PQTRANS_INTRANS) return Outcome::failure;
    return o;
  });
}

}  // namespace dlock::tx

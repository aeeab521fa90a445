// A PostgreSQL database taking part in 2PC: a branch's work in a local
// transaction ended by PREPARE TRANSACTION, then COMMIT PREPARED or
// ROLLBACK PREPARED by its transaction id ("dlock:<log id>:<gid>:<branch>").
// Every call takes a connection of its own from a pool (a prepared
// transaction leaves its session, so the connection is free again at once):
// a work waiting for a row that one of our prepared transactions locked
// cannot block the commit that frees it, and concurrent commits do not
// queue on one connection.
#ifndef DLOCK_TX_PG_XA_HPP_
#define DLOCK_TX_PG_XA_HPP_

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "dlock/tx.hpp"
#include "postgres/pg_connection.hpp"
#include "tx/pg_pool.hpp"
#include "tx/socket_cutter.hpp"

namespace dlock::tx::detail {

// "dlock:<log>:<gid>:<branch>", and back: false when `xid` is not of the
// log `log` (another log's, or not dlock's).
std::string xid_of(std::string_view log, std::string_view gid, int branch);
bool parse_xid(std::string_view xid, std::string_view log, std::string& gid, int& branch);

class XaDatabase {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects and checks that the server takes prepared transactions
  // (max_prepared_transactions > 0): precondition_failed otherwise.
  static Result<std::unique_ptr<XaDatabase>> open(std::string_view url);
  ~XaDatabase();

  // Runs `work` in a transaction and prepares it as `xid`. Already prepared
  // (an earlier attempt whose answer was lost): success without `work`. A
  // work that says success but left no open transaction (it committed, or a
  // statement failed and aborted it) is a failure: nothing is prepared.
  //
  // By `deadline`: the work runs with lock_timeout and statement_timeout set
  // to the time left, and its connection is cut at the deadline if it is
  // still running then (unknown: nothing was prepared, the server rolls it
  // back when it sees the connection gone).
  Outcome prepare(const std::string& xid, const std::function<Outcome(pg_conn*)>& work, std::string& error,
                  Clock::time_point deadline);
  // COMMIT PREPARED / ROLLBACK PREPARED. An xid the server does not know
  // is done: committed or rolled back by an earlier attempt (a commit is
  // only decided once every branch was prepared; a rollback of a branch
  // never prepared has nothing to do).
  // Each answers by `by` (and within the command timeout), or is unknown.
  Outcome commit(const std::string& xid, std::string& error, Clock::time_point by = Clock::time_point::max()) {
    return finish("COMMIT", xid, error, by);
  }
  Outcome rollback(const std::string& xid, std::string& error, Clock::time_point by = Clock::time_point::max()) {
    return finish("ROLLBACK", xid, error, by);
  }
  // The prepared transactions of this database with dlock's prefix.
  Result<std::vector<std::string>> prepared();

 private:
  explicit XaDatabase(postgres::PgConfig config) : pool_(std::move(config)) {}
  Outcome finish(const char* verb, const std::string& xid, std::string& error, Clock::time_point by);
  PgPool pool_;
  SocketCutter cutter_;
  // xids this process has tried to prepare and not finished: only a retry
  // can find its xid prepared already (a claim that passes to another
  // coordinator aborts what was undecided, never tries it), so only a retry
  // looks first.
  std::mutex tried_mu_;
  std::unordered_set<std::string> tried_;  // under tried_mu_
};

}  // namespace dlock::tx::detail

#endif  // DLOCK_TX_PG_XA_HPP_

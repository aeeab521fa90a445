// transfer-example: a money transfer from wallet A to account B as one TCC
// transaction (<dlock/tx.hpp>), start to finish in one program.
//
//   A, in-process: Try moves the amount from `available` to `frozen`,
//      Confirm from `frozen` to `spent`, Cancel back to `available`.
//   B, an HTTP service: Try notes the credit as `incoming`, Confirm adds it
//      to `balance`, Cancel drops it. B takes no credit over 50.
//
// Each keeps its money in its own SQLite database, and each call runs behind
// tx::sqlite_barrier, so that a repeated call, a Cancel with no Try before
// it and a Try arriving after its Cancel are all harmless. The first
// transfer commits; the second is refused by B, so A's freeze is undone.
#include <sqlite3.h>
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <dlock/tx.hpp>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>

#include "common/http_service.hpp"

namespace tx = dlock::tx;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t kLimit = 50;  // B's largest credit

using Db = std::unique_ptr<sqlite3, decltype(&sqlite3_close)>;

Db open_db(const std::string& path, const char* setup) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_busy_timeout(db, 1000);  // a participant's call should end well before the coordinator's deadline
  sqlite3_exec(db, setup, nullptr, nullptr, nullptr);
  return Db(db, &sqlite3_close);
}

// Runs `sql` with ?1 bound to the payload's amount, inside the barrier's
// transaction. No row changed means the condition in its WHERE did not hold.
tx::Outcome update(sqlite3* db, const char* sql, const tx::BranchContext& c) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) return tx::Outcome::unknown;
  sqlite3_bind_int64(st, 1, std::stoll(c.payload));
  const int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  // A failed statement may be a busy file: not a "no", so unknown (asked again).
  if (rc != SQLITE_DONE) return tx::Outcome::unknown;
  return sqlite3_changes(db) == 1 ? tx::Outcome::success : tx::Outcome::failure;
}

std::int64_t value(sqlite3* db, const char* sql) {
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, sql, -1, &st, nullptr);
  const std::int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  return v;
}

// What run() answered, and what a caller does about it. true: the outcome is
// settled (committed or aborted), nothing left to do here.
bool report(const std::string& gid, const dlock::Result<tx::State>& r) {
  if (r.ok()) {
    // committing: decided, but a Confirm is still to do; recover() does it.
    std::cout << gid << ": " << (*r == tx::State::committed ? "committed" : "commit decided, finishing") << '\n';
    return true;
  }
  switch (r.code()) {
    case dlock::Errc::aborted:  // decided to abort: every Try is (or will be) cancelled
      std::cout << gid << ": aborted, nothing moved: " << r.status().message() << '\n';
      return true;
    case dlock::Errc::in_doubt:
      // The decision may have been logged. Never run the transfer again under
      // a new gid (it might then happen twice): ask show(gid) later, or let
      // recover() finish it, the same way for every branch.
      std::cout << gid << ": in doubt; ask show(\"" << gid << "\") later\n";
      return false;
    default:
      // busy, invalid_argument, or the log failing before anything was
      // decided: nothing was confirmed. Running the SAME gid again is safe
      // (the log refuses a gid it has, or it runs once).
      std::cout << gid << ": not run: " << r.status().to_string() << '\n';
      return false;
  }
}

// Both transfers, with every database in `dir`; 0 when they end as shown.
int run(const std::string& dir) {
  // --- Participant A: in-process calls on A's own database. ---
  Db a = open_db(dir + "/a.db",
                 "CREATE TABLE wallet (available INTEGER, frozen INTEGER, spent INTEGER);"
                 "INSERT INTO wallet VALUES (100, 0, 0)");
  auto a_call = [db = a.get()](const char* sql) {
    // The coordinator calls A on run()'s thread and cannot interrupt it:
    // keep the call short (it waits for it; a Try ending after the
    // deadline still aborts the transaction).
    return [db, sql](const tx::BranchContext& c) {
      return tx::sqlite_barrier(db, c, [&](sqlite3* conn) { return update(conn, sql, c); });
    };
  };
  tx::Participant wallet_a{
      a_call("UPDATE wallet SET available = available - ?1, frozen = frozen + ?1 WHERE available >= ?1"),
      a_call("UPDATE wallet SET frozen = frozen - ?1, spent = spent + ?1"),
      a_call("UPDATE wallet SET frozen = frozen - ?1, available = available + ?1")};

  // --- Participant B: an HTTP service on B's own database. ---
  Db b = open_db(dir + "/b.db",
                 "CREATE TABLE account (balance INTEGER, incoming INTEGER);"
                 "INSERT INTO account VALUES (0, 0)");
  std::mutex b_mu;  // one connection; the service runs a thread per client connection
  dlock::tools::HttpService b_service([&](const std::string& target, const std::string& body) {
    std::lock_guard lock(b_mu);
    // handle_http answers 200 success, 409 failure, 425 ongoing, 500 unknown.
    tx::HttpReply reply = tx::handle_http(target, body, [&](const tx::BranchContext& c) {
      return tx::sqlite_barrier(b.get(), c, [&](sqlite3* db) {
        switch (c.op) {
          case tx::Op::try_:
            // Over the limit is a definite "no" (409): this credit is not
            // done and never will be, so the transaction aborts at once. An
            // error after which it might be done must answer unknown instead.
            if (std::stoll(c.payload) > kLimit) return tx::Outcome::failure;
            return update(db, "UPDATE account SET incoming = incoming + ?1", c);
          case tx::Op::confirm:
            return update(db, "UPDATE account SET balance = balance + ?1, incoming = incoming - ?1", c);
          case tx::Op::cancel:
            return update(db, "UPDATE account SET incoming = incoming - ?1", c);
        }
        return tx::Outcome::unknown;
      });
    });
    return dlock::tools::HttpAnswer{reply.status, reply.body};
  });

  // --- The coordinator: its log in a SQLite file of its own. ---
  tx::CoordinatorOptions options;
  options.timeout = 5s;        // the Try phase; then the transaction aborts
  options.finish_within = 5s;  // run() drives Confirm/Cancel this long, then leaves them to recover()
  auto coordinator = tx::Coordinator::open("sqlite://" + dir + "/tx.db", options);
  if (!coordinator.ok()) {
    std::cerr << "cannot open the log: " << coordinator.status().to_string() << '\n';
    return 1;
  }
  tx::HttpParticipant account_b;
  account_b.try_url = b_service.url("/try");
  account_b.confirm_url = b_service.url("/confirm");
  account_b.cancel_url = b_service.url("/cancel");
  account_b.timeout = 2s;  // per call, and never past the coordinator's deadline
  coordinator->add_participant("wallet-a", wallet_a);
  coordinator->add_participant("account-b", tx::http_participant(account_b).value());

  // A gid names one business operation: reuse it only to retry that one.
  const bool first = report("transfer-1", coordinator->run("transfer-1", {{"wallet-a", "30"}, {"account-b", "30"}}));
  const bool second = report("transfer-2", coordinator->run("transfer-2", {{"wallet-a", "60"}, {"account-b", "60"}}));
  // In a service, recover() runs periodically, in one or more processes: it
  // finishes whatever a run() left (committing, in doubt, a crash).
  (void)coordinator->recover();

  std::cout << "balances: A available=" << value(a.get(), "SELECT available FROM wallet")
            << " frozen=" << value(a.get(), "SELECT frozen FROM wallet")
            << " spent=" << value(a.get(), "SELECT spent FROM wallet")
            << "; B balance=" << value(b.get(), "SELECT balance FROM account")
            << " incoming=" << value(b.get(), "SELECT incoming FROM account") << '\n';
  const auto t1 = coordinator->show("transfer-1"), t2 = coordinator->show("transfer-2");
  const bool as_shown =
      first && second && t1.ok() && t1->state == tx::State::committed && t2.ok() && t2->state == tx::State::aborted;
  return as_shown ? 0 : 1;
}

}  // namespace

int main() {
  std::string dir = (std::filesystem::temp_directory_path() / "dlock-transfer-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) return 1;
  const int status = run(dir);
  std::filesystem::remove_all(dir);
  return status;
}

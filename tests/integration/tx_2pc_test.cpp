// 2PC over PostgreSQL participants (PREPARE TRANSACTION) on a real server
// that the test starts with two databases, stock and payment; the log in a
// SQLite file. A coordinator killed between the votes and the decision, or
// after it, leaves prepared transactions holding locks: recovery ends them
// the way the log says, and rolls back any prepared transaction of ours the
// log does not know.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "dlock/tx.hpp"
#include "integration/tx_bank.hpp"
#include "support/postgres_server.hpp"
#include "support/temp_dir.hpp"

namespace dlock::tx {
namespace {

using namespace std::chrono_literals;

// Runs `sql` on the open transaction of a branch: success, or failure when
// the statement is refused (a CHECK, no row).
Outcome run_sql(pg_conn* conn, const std::string& sql) {
  PGresult* r = PQexec(conn, sql.c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK && std::string(PQcmdTuples(r)) == "1";
  PQclear(r);
  return ok ? Outcome::success : Outcome::failure;
}

class Tx2pc : public ::testing::Test {
 protected:
  Tx2pc() {
    pg.set("max_prepared_transactions", "10");
    pg.stop();
    pg.start();
    pg.psql("CREATE DATABASE stock");
    pg.psql("CREATE DATABASE payment");
    sql("stock",
        "CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL CHECK (n >= 0)); INSERT INTO items VALUES (1, 3)");
    sql("payment", "CREATE TABLE paid (order_id int PRIMARY KEY, cents int NOT NULL)");
  }
  std::string url(const std::string& db) const {
    return "postgres://postgres@127.0.0.1:" + std::to_string(pg.port()) + "/" + db;
  }
  std::string sql(const std::string& db, const std::string& text) const { return pg.psql(text, db); }
  std::string stock() const { return sql("stock", "SELECT n FROM items WHERE id = 1"); }
  std::string payments() const { return sql("payment", "SELECT count(*) FROM paid"); }
  std::string prepared() const { return pg.psql("SELECT count(*) FROM pg_prepared_xacts"); }
  // The log's id, which marks its prepared transactions.
  std::string log_id() const {
    sqlite3* db = nullptr;
    std::string id;
    if (sqlite3_open(dir.file("tx.db").c_str(), &db) == SQLITE_OK) {
      sqlite3_stmt* st = nullptr;
      sqlite3_prepare_v2(db, "SELECT value FROM dlock_tx_meta WHERE key = 'log_id'", -1, &st, nullptr);
      if (sqlite3_step(st) == SQLITE_ROW) id = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
      sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return id;
  }

  Coordinator open(CoordinatorOptions o = {}) const {
    auto c = Coordinator::open("sqlite://" + dir.file("tx.db"), std::move(o));
    if (!c.ok()) throw Error(c.status());
    if (Status s = c->add_database("stock", url("stock")); !s.ok()) throw Error(s);
    if (Status s = c->add_database("payment", url("payment")); !s.ok()) throw Error(s);
    return std::move(*c);
  }
  static std::vector<XaBranch> order(int id) {
    return {{"stock", [](pg_conn* c) { return run_sql(c, "UPDATE items SET n = n - 1 WHERE id = 1"); }},
            {"payment",
             [id](pg_conn* c) { return run_sql(c, "INSERT INTO paid VALUES (" + std::to_string(id) + ", 1999)"); }}};
  }

  // Runs order `id` in a child coordinator killed right after `step`,
  // which leaves `left_prepared` prepared transactions; then recovers it
  // here until it is finished.
  State crash_after(const std::string& step, int id, const std::string& left_prepared) {
    const std::string gid = "o" + std::to_string(id);
    const pid_t pid = ::fork();
    if (pid == 0) {
      CoordinatorOptions o;
      o.claim_lease = 200ms;
      o.on_step = [&](std::string_view, std::string_view s) {
        if (s == step) ::_exit(0);
      };
      try {
        auto c = open(o);
        (void)c.run_2pc(gid, order(id));
      } catch (...) {
        ::_exit(2);
      }
      ::_exit(3);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    EXPECT_EQ(prepared(), left_prepared) << "prepared transactions the dead coordinator left";
    auto c = open();
    auto info = recover_until_finished(c, gid);
    EXPECT_TRUE(info.ok()) << info.status().to_string();
    return info.ok() ? info->state : State::trying;
  }

  test::PostgresServer pg;
  test::TempDir dir;
};

TEST_F(Tx2pc, BothDatabasesCommitOrNeither) {
  auto c = open();
  auto r = c.run_2pc("o1", order(1));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, State::committed);
  EXPECT_EQ(stock(), "2\n");
  EXPECT_EQ(payments(), "1\n");
  // Order 1 again in another transaction: payment refuses (the key), so the
  // stock taken in the same transaction is given back.
  auto again = c.run_2pc("o1-again", order(1));
  EXPECT_EQ(again.code(), Errc::aborted) << again.status().to_string();
  EXPECT_EQ(stock(), "2\n");
  EXPECT_EQ(payments(), "1\n");
  EXPECT_EQ(prepared(), "0\n") << "nothing left prepared";
  EXPECT_EQ(c.run_2pc("bad'id", order(2)).code(), Errc::invalid_argument);
  EXPECT_EQ(c.run_2pc("o2", {{"nowhere", order(2)[0].work}}).code(), Errc::invalid_argument);
}

TEST_F(Tx2pc, ParallelBranchesPrepareTogetherAndCommitOrNeither) {
  CoordinatorOptions o;
  o.parallel_branches = true;
  auto c = open(o);
  // Each branch's work waits (up to 10 s) for the other's to start: met
  // only if both are in flight at once, on connections of their own.
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  auto together = [&](Outcome (*work)(pg_conn*, int), int id) {
    return [&, work, id](pg_conn* conn) {
      {
        std::unique_lock lk(mu);
        ++started;
        cv.notify_all();
        if (!cv.wait_for(lk, 10s, [&] { return started % 2 == 0; })) return Outcome::failure;
      }
      return work(conn, id);
    };
  };
  auto take = [](pg_conn* conn, int) { return run_sql(conn, "UPDATE items SET n = n - 1 WHERE id = 1"); };
  auto pay = [](pg_conn* conn, int id) {
    return run_sql(conn, "INSERT INTO paid VALUES (" + std::to_string(id) + ", 1999)");
  };
  auto r = c.run_2pc("p1", {{"stock", together(take, 1)}, {"payment", together(pay, 1)}});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, State::committed);
  EXPECT_EQ(stock(), "2\n");
  EXPECT_EQ(payments(), "1\n");
  auto again = c.run_2pc("p1-again", {{"stock", together(take, 1)}, {"payment", together(pay, 1)}});
  EXPECT_EQ(again.code(), Errc::aborted) << again.status().to_string();
  EXPECT_EQ(stock(), "2\n") << "the stock prepared beside the refused payment is rolled back";
  EXPECT_EQ(payments(), "1\n");
  EXPECT_EQ(prepared(), "0\n");
}

TEST_F(Tx2pc, KilledAfterTheVotesBeforeTheDecisionIsRolledBack) {
  EXPECT_EQ(crash_after("after try 1", 5, "2\n"), State::aborted) << "presumed abort";
  EXPECT_EQ(stock(), "3\n");
  EXPECT_EQ(payments(), "0\n");
  EXPECT_EQ(prepared(), "0\n") << "no prepared transaction left holding locks";
}

TEST_F(Tx2pc, KilledAfterTheDecisionIsCommitted) {
  EXPECT_EQ(crash_after("committing", 6, "2\n"), State::committed);
  EXPECT_EQ(stock(), "2\n");
  EXPECT_EQ(payments(), "1\n");
  EXPECT_EQ(prepared(), "0\n");
}

TEST_F(Tx2pc, KilledBetweenTwoCommitsIsFinished) {
  EXPECT_EQ(crash_after("after confirm 0", 7, "1\n"), State::committed);
  EXPECT_EQ(stock(), "2\n");
  EXPECT_EQ(payments(), "1\n");
  EXPECT_EQ(prepared(), "0\n");
}

TEST_F(Tx2pc, APreparedTransactionOfThisLogThatItDoesNotKnowIsRolledBack) {
  auto c = open();
  const std::string ours = "dlock:" + log_id() + ":ghost:0";
  sql("stock", "BEGIN; UPDATE items SET n = 0 WHERE id = 1; PREPARE TRANSACTION '" + ours + "'");
  sql("stock", "BEGIN; UPDATE items SET n = n WHERE false; PREPARE TRANSACTION 'dlock:otherlog0000:g:0'");
  sql("stock", "BEGIN; UPDATE items SET n = n WHERE false; PREPARE TRANSACTION 'not-ours'");
  ASSERT_EQ(prepared(), "3\n");
  auto n = c.recover();
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(stock(), "3\n");
  EXPECT_EQ(pg.psql("SELECT gid FROM pg_prepared_xacts ORDER BY gid"), "dlock:otherlog0000:g:0\nnot-ours\n")
      << "another log's and others' are not touched";
  sql("stock", "ROLLBACK PREPARED 'not-ours'");
  sql("stock", "ROLLBACK PREPARED 'dlock:otherlog0000:g:0'");
}

TEST_F(Tx2pc, ConcurrentOrdersOnOneRowWaitForEachOtherAndNeverOversell) {
  // Each order's stock branch waits for the row another order has
  // prepared; that order's COMMIT PREPARED must not wait for it in turn.
  for (bool parallel : {false, true}) {
    SCOPED_TRACE(parallel ? "parallel branches" : "in order");
    sql("stock", "UPDATE items SET n = 3 WHERE id = 1");
    sql("payment", "DELETE FROM paid");
    CoordinatorOptions o;
    o.parallel_branches = parallel;
    auto c = open(o);
    Tally tally;
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 3; ++i) {
          const int id = 100 + 10 * t + i;
          tally.add(c.run_2pc("c" + std::to_string(id) + (parallel ? "p" : ""), order(id)));
        }
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(tally.committed, 3) << "3 in stock";
    EXPECT_EQ(tally.aborted, 3);
    EXPECT_EQ(stock(), "0\n");
    EXPECT_EQ(payments(), "3\n");
    EXPECT_EQ(prepared(), "0\n");
  }
}

TEST_F(Tx2pc, AWorkThatSaysSuccessAfterAFailedStatementIsNoVote) {
  auto c = open();
  auto r = c.run_2pc("w1", {{"stock",
                             [](pg_conn* conn) {
                               PQclear(PQexec(conn, "UPDATE items SET n = -5 WHERE id = 1"));  // CHECK fails
                               return Outcome::success;  // and it says success all the same
                             }},
                            order(9)[1]});
  EXPECT_EQ(r.code(), Errc::aborted) << r.status().to_string();
  EXPECT_NE(r.status().message().find("after a statement failed"), std::string::npos) << r.status().message();
  auto committing = c.run_2pc("w2", {{"stock",
                                      [](pg_conn* conn) {
                                        PQclear(PQexec(conn, "COMMIT"));  // ends the transaction itself
                                        return Outcome::success;
                                      }},
                                     order(10)[1]});
  EXPECT_EQ(committing.code(), Errc::aborted) << committing.status().to_string();
  EXPECT_NE(committing.status().message().find("left no open transaction"), std::string::npos)
      << committing.status().message();
  EXPECT_EQ(stock(), "3\n");
  EXPECT_EQ(payments(), "0\n");
  EXPECT_EQ(prepared(), "0\n");
}

TEST(Tx2pcPreflight, AServerThatCannotPrepareIsRefusedClearly) {
  test::PostgresServer pg;
  test::TempDir dir;
  pg.set("max_prepared_transactions", "0");
  pg.stop();
  pg.start();
  auto c = Coordinator::open("sqlite://" + dir.file("tx.db"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const Status s = c->add_database("db", pg.url());
  EXPECT_EQ(s.code(), Errc::precondition_failed) << s.to_string();
  EXPECT_NE(s.message().find("max_prepared_transactions"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace dlock::tx

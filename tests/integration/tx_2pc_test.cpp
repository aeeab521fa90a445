// 2PC over PostgreSQL participants (PREPARE TRANSACTION) on a real server
// that the test starts with two databases, stock and payment; the log in a
// SQLite file. A coordinator killed between the votes and the decision, or
// after it, leaves prepared transactions holding locks: recovery ends them
// the way the log says, and rolls back any prepared transaction of ours the
// log does not know.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "dlock/tx.hpp"
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
    auto info = c.show(gid);
    for (auto until = std::chrono::steady_clock::now() + 10s;
         info.ok() && !finished(info->state) && std::chrono::steady_clock::now() < until; info = c.show(gid)) {
      (void)c.retry_now(gid);
      auto n = c.recover();
      EXPECT_TRUE(n.ok()) << n.status().to_string();
      std::this_thread::sleep_for(20ms);
    }
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

TEST_F(Tx2pc, APreparedTransactionTheLogDoesNotKnowIsRolledBack) {
  sql("stock", "BEGIN; UPDATE items SET n = 0 WHERE id = 1; PREPARE TRANSACTION 'dlock:ghost:0'");
  sql("stock", "BEGIN; UPDATE items SET n = n WHERE id = 1 AND false; PREPARE TRANSACTION 'not-ours'");
  ASSERT_EQ(prepared(), "2\n");
  auto c = open();
  auto n = c.recover();
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(stock(), "3\n");
  EXPECT_EQ(pg.psql("SELECT gid FROM pg_prepared_xacts"), "not-ours\n") << "others' are not touched";
  sql("stock", "ROLLBACK PREPARED 'not-ours'");
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

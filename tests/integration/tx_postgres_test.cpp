// TCC transactions with the log in a real PostgreSQL server that the test
// starts: several coordinators share it, a crashed server keeps every
// decision even where the server's own setting would not wait for the disk.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <atomic>
#include <thread>
#include <vector>

#include "dlock/tx.hpp"
#include "integration/tx_bank.hpp"
#include "postgres/pg_blocking.hpp"
#include "postgres/url.hpp"
#include "support/pgbouncer.hpp"
#include "support/postgres_server.hpp"
#include "support/temp_dir.hpp"
#include "tx/pg_log.hpp"

namespace dlock::tx {
namespace {

using namespace std::chrono_literals;

class TxPostgres : public ::testing::Test {
 protected:
  Coordinator open(CoordinatorOptions o = {}) {
    auto c = Coordinator::open(pg.url(), std::move(o));
    if (!c.ok()) throw Error(c.status());
    c->add_participant("alice", alice.debit());
    c->add_participant("bob", bob.credit());
    return std::move(*c);
  }
  void expect_settled(std::int64_t total = 150) {
    EXPECT_EQ(alice.column("balance") + bob.column("balance"), total) << "money is conserved";
    EXPECT_EQ(alice.column("frozen"), 0);
    EXPECT_EQ(bob.column("incoming"), 0);
  }
  static std::vector<Branch> transfer(int amount) {
    return {{"alice", std::to_string(amount)}, {"bob", std::to_string(amount)}};
  }

  test::PostgresServer pg;
  test::TempDir dir;
  Bank alice{dir.file("alice.db"), 100};
  Bank bob{dir.file("bob.db"), 50};
};

TEST_F(TxPostgres, CommitsAbortsAndShowsWhatItDid) {
  auto c = open();
  auto r = c.run("p1", transfer(30));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, State::committed);
  auto a = c.run("p2", transfer(500));
  EXPECT_EQ(a.code(), Errc::aborted) << a.status().to_string();
  EXPECT_EQ(c.run("p1", transfer(1)).code(), Errc::invalid_argument) << "a gid is used once";
  EXPECT_EQ(alice.column("balance"), 70);
  EXPECT_EQ(bob.column("balance"), 80);
  expect_settled();
  auto info = c.show("p2");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->state, State::aborted);
  EXPECT_NE(info->reason.find("Try failed"), std::string::npos) << info->reason;
  ASSERT_EQ(info->branches.size(), 2u);
  EXPECT_EQ(info->branches[0].payload, "500");
  EXPECT_EQ(pg.psql("SELECT count(*) FROM public.dlock_tx WHERE state = 'committed'"), "1\n");
}

TEST_F(TxPostgres, AnotherCoordinatorFinishesADecidedCommit) {
  CoordinatorOptions o;
  o.finish_within = 200ms;  // one round of Confirms; bob's retry falls after it
  o.retry_base = 1000ms;
  auto first = open(o);
  first.add_participant(
      "bob", {bob.credit().try_, [](const BranchContext&) { return Outcome::unknown; }, bob.credit().cancel});
  auto r = first.run("p3", transfer(10));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(*r, State::committing);
  auto second = open();
  ASSERT_TRUE(second.retry_now("p3").ok());
  auto n = second.recover();
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(second.show("p3")->state, State::committed);
  expect_settled();
  EXPECT_EQ(bob.column("balance"), 60);
}

TEST_F(TxPostgres, CoordinatorsSharingTheLogWithRecoveryRunningConserveMoney) {
  CoordinatorOptions o;
  o.retry_base = 1ms;
  auto a = open(o);
  auto b = open(o);
  std::atomic<bool> stop{false};
  std::thread recovery([&] {
    auto r = open(o);
    while (!stop) {
      auto n = r.recover();
      if (!n.ok()) ADD_FAILURE() << n.status().to_string();
      std::this_thread::sleep_for(5ms);
    }
  });
  Tally tally;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Coordinator& c = t % 2 ? a : b;
      for (int i = 0; i < 8; ++i) tally.add(c.run("s" + std::to_string(t) + "-" + std::to_string(i), transfer(9)));
    });
  for (auto& th : threads) th.join();
  stop = true;
  recovery.join();
  EXPECT_EQ(tally.committed, 11) << "alice's 100 covers 11 transfers of 9";
  EXPECT_EQ(tally.aborted, 32 - 11);
  EXPECT_EQ(alice.column("balance"), 1);
  expect_settled();
}

// Many transactions at once on one coordinator: their log writes are
// committed in shared batches. One the server refuses (bytes that are not
// UTF-8 in its id) fails alone, and nothing of it is done.
TEST_F(TxPostgres, ManyTransactionsAtOnceShareCommitsAndOneTheServerRefusesFailsAlone) {
  CoordinatorOptions o;
  o.retry_base = 1ms;
  o.parallel_branches = true;
  auto c = open(o);
  Tally tally;
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 6; ++i) {
        if (i == 3) {
          auto r = c.run("bad-\xff-" + std::to_string(t), transfer(1));
          if (!r.ok() && r.code() != Errc::aborted) ++refused;
          continue;
        }
        tally.add(c.run("g" + std::to_string(t) + "-" + std::to_string(i), transfer(1)));
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(refused, 8);
  EXPECT_EQ(tally.committed, 40);
  EXPECT_EQ(alice.column("balance"), 60);
  EXPECT_EQ(bob.column("balance"), 90);
  expect_settled();
  auto left = c.list_unfinished();
  ASSERT_TRUE(left.ok()) << left.status().to_string();
  EXPECT_TRUE(left->empty());
}

// Behind PgBouncer in transaction mode, a session's statements outside a
// transaction land on whichever server connection is free, and Debian's
// PgBouncer (1.18) does not carry prepared statements across them; here it
// also resets each server connection after every transaction, so a name
// prepared is always missing at its next use. The log falls back to
// unprepared statements and every transaction commits.
TEST_F(TxPostgres, TheLogWorksBehindAPoolerInTransactionMode) {
  if (!test::pgbouncer_available()) GTEST_SKIP() << "pgbouncer is not installed";
  test::PgBouncer bouncer(pg.port(), 2, true);
  CoordinatorOptions o;
  o.retry_base = 1ms;
  o.parallel_branches = true;
  auto c = Coordinator::open(bouncer.url(), o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  c->add_participant("alice", alice.debit());
  c->add_participant("bob", bob.credit());
  Tally tally;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 8; ++i) tally.add(c->run("pb" + std::to_string(t) + "-" + std::to_string(i), transfer(1)));
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(tally.committed, 32);
  EXPECT_EQ(alice.column("balance"), 68);
  expect_settled();
  auto n = c->recover();
  EXPECT_TRUE(n.ok()) << n.status().to_string();
  auto left = c->list_unfinished();
  ASSERT_TRUE(left.ok()) << left.status().to_string();
  EXPECT_TRUE(left->empty());
  auto info = c->show("pb3-7");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->state, State::committed);
}

TEST_F(TxPostgres, ADecisionSurvivesAServerCrashEvenWithSynchronousCommitOff) {
  pg.psql("ALTER SYSTEM SET synchronous_commit = off");
  pg.psql("SELECT pg_reload_conf()");
  {
    CoordinatorOptions o;
    o.finish_within = 200ms;  // one round of Confirms; bob's retry falls after it
    o.retry_base = 1000ms;
    o.claim_lease = 300ms;  // should the claim outlive the crash, recovery waits this long
    auto c = open(o);
    c.add_participant("bob",
                      {bob.credit().try_, [](const BranchContext&) { return Outcome::unknown; }, bob.credit().cancel});
    auto r = c.run("p4", transfer(5));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(*r, State::committing);
    pg.crash();  // right after the writes: no WAL writer round since
  }
  pg.start();
  auto c = open();
  auto info = c.show("p4");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->state, State::committing) << "the decision was flushed before it was acted on";
  EXPECT_TRUE(info->branches[0].done) << "and so was the progress saved";
  auto end = recover_until_finished(c, "p4");
  ASSERT_TRUE(end.ok()) << end.status().to_string();
  EXPECT_EQ(end->state, State::committed);
  expect_settled();
}

TEST_F(TxPostgres, ALogWriteWithAStaleFenceOrStateChangesNothing) {
  auto log = detail::open_pg_log(pg.url());
  ASSERT_TRUE(log.ok()) << log.status().to_string();
  auto first = (*log)->create("f", transfer(1), 0ms);  // a claim that lapses at once
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(*first, 1u);
  EXPECT_EQ((*log)->create("f", transfer(1), 60s).code(), Errc::invalid_argument) << "a gid is logged once";
  std::this_thread::sleep_for(2ms);  // the log's clock counts ms: the lapse is past
  auto taken = (*log)->claim("f", 60s);
  ASSERT_TRUE(taken.ok()) << taken.status().to_string();
  ASSERT_TRUE(taken->has_value());
  EXPECT_EQ(**taken, 2u) << "a takeover raises the fence";
  auto again = (*log)->claim("f", 60s);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value()) << "a live claim is not taken over";
  auto stale = (*log)->move("f", 1, State::trying, State::committing, {});
  ASSERT_TRUE(stale.ok()) << stale.status().to_string();
  EXPECT_FALSE(*stale) << "a coordinator paused past its claim cannot decide";
  auto stale_renewal = (*log)->renew("f", 1, 60s);
  ASSERT_TRUE(stale_renewal.ok()) << stale_renewal.status().to_string();
  EXPECT_FALSE(*stale_renewal) << "nor keep its claim";
  auto newer = (*log)->move("f", 2, State::trying, State::aborting, "taken over");
  ASSERT_TRUE(newer.ok());
  EXPECT_TRUE(*newer);
  std::vector<BranchInfo> progress(2);
  progress[0].done = true;
  auto late_save = (*log)->save("f", 1, State::aborting, progress, 0ms);
  ASSERT_TRUE(late_save.ok());
  EXPECT_FALSE(*late_save) << "fence 1 is below the 2 that wrote last";
  auto wrong_state = (*log)->move("f", 9, State::trying, State::committing, {});
  ASSERT_TRUE(wrong_state.ok());
  EXPECT_FALSE(*wrong_state) << "every move is a compare-and-set on the state";
  auto info = (*log)->load("f");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, State::aborting);
  EXPECT_EQ(info->reason, "taken over");
  EXPECT_FALSE(info->branches[0].done) << "the stale save wrote no branch either";
  auto saved = (*log)->save("f", 2, State::aborting, progress, 0ms);
  ASSERT_TRUE(saved.ok() && *saved);
  EXPECT_TRUE((*log)->load("f")->branches[0].done);
  auto after_save = (*log)->claim("f", 60s);
  ASSERT_TRUE(after_save.ok());
  ASSERT_TRUE(after_save->has_value()) << "a save hands the transaction to recovery: its claim ends";
  EXPECT_EQ(**after_save, 3u);
}

// The log's statements are prepared once per connection; a session that
// lost them (DISCARD ALL, or a pooler that moved it) prepares them again.
TEST_F(TxPostgres, AStatementTheServerForgotIsPreparedAgain) {
  auto url = postgres::parse_postgres_url(pg.url());
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  postgres::PgBlocking c(url->connection);
  auto first = c.exec_prepared("SELECT $1::int + 1", {"41"});
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ((*first)[0][0].value_or(""), "42");
  auto count = c.exec("SELECT count(*) FROM pg_prepared_statements", {});
  ASSERT_TRUE(count.ok());
  EXPECT_EQ((*count)[0][0].value_or(""), "1");
  ASSERT_TRUE(c.exec("DISCARD ALL", {}).ok());
  auto again = c.exec_prepared("SELECT $1::int + 1", {"1"});
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ((*again)[0][0].value_or(""), "2");
  auto bad = c.exec_prepared("SELECT $1::int + 1", {"x"});
  EXPECT_FALSE(bad.ok()) << "a refused statement is still an error";
  auto after = c.exec_prepared("SELECT $1::int + 1", {"2"});
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  EXPECT_EQ((*after)[0][0].value_or(""), "3");
}

// The participant-side barrier on PostgreSQL, on the participant's own
// connection: the same three rules as on SQLite.
TEST_F(TxPostgres, ThePgBarrierMakesCallsIdempotentAndBlocksATryAfterItsCancel) {
  pg.psql("CREATE TABLE acct (incoming int NOT NULL, balance int NOT NULL); INSERT INTO acct VALUES (0, 0)");
  pg_conn* conn = PQconnectdb(pg.url().c_str());
  ASSERT_EQ(PQstatus(conn), CONNECTION_OK) << PQerrorMessage(conn);
  int ran = 0;
  auto step = [&](const char* sql) {
    return [&ran, sql](pg_conn* c) {
      PGresult* r = PQexec(c, sql);
      const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
      PQclear(r);
      if (ok) ++ran;
      return ok ? Outcome::success : Outcome::failure;
    };
  };
  const auto try_ = step("UPDATE acct SET incoming = incoming + 3");
  const auto confirm = step("UPDATE acct SET balance = balance + 3, incoming = incoming - 3");
  const auto cancel = step("UPDATE acct SET incoming = incoming - 3");
  EXPECT_EQ(pg_barrier(conn, {"g", 0, Op::cancel, ""}, cancel), Outcome::success) << "empty compensation";
  EXPECT_EQ(pg_barrier(conn, {"g", 0, Op::try_, ""}, try_), Outcome::success);
  EXPECT_EQ(ran, 0) << "a Try after its Cancel does nothing (anti-suspension)";
  EXPECT_EQ(pg_barrier(conn, {"h", 0, Op::try_, ""}, try_), Outcome::success);
  EXPECT_EQ(pg_barrier(conn, {"h", 0, Op::try_, ""}, try_), Outcome::success);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pg_barrier(conn, {"h", 0, Op::confirm, ""}, confirm), Outcome::success);
  EXPECT_EQ(ran, 2) << "a duplicate Try and two duplicate Confirms ran nothing";
  EXPECT_EQ(pg.psql("SELECT incoming, balance FROM acct"), "0|3\n");
  // A work that fails rolls back its barrier row with it: asked again, it runs.
  EXPECT_EQ(pg_barrier(conn, {"k", 0, Op::try_, ""}, step("UPDATE acct SET nosuchcolumn = 1")), Outcome::failure);
  EXPECT_EQ(pg_barrier(conn, {"k", 0, Op::try_, ""}, try_), Outcome::success);
  EXPECT_EQ(pg.psql("SELECT incoming FROM acct"), "3\n");
  // A work that says success after a failed statement is a failure.
  EXPECT_EQ(pg_barrier(conn, {"m", 0, Op::try_, ""},
                       [](pg_conn* c) {
                         PQclear(PQexec(c, "UPDATE acct SET nosuchcolumn = 1"));
                         return Outcome::success;
                       }),
            Outcome::failure);
  EXPECT_EQ(PQtransactionStatus(conn), PQTRANS_IDLE) << "the connection is left as it was found";
  // The table is checked once per database, and no NOTICE reaches the
  // participant's connection; one dropped since is made again: the call
  // that finds it gone is unknown (asked again), the next one runs.
  int notices = 0;
  PQsetNoticeReceiver(
      conn, [](void* n, const PGresult*) { ++*static_cast<int*>(n); }, &notices);
  EXPECT_EQ(pg_barrier(conn, {"n", 0, Op::try_, ""}, try_), Outcome::success);
  EXPECT_EQ(notices, 0);
  pg.psql("DROP TABLE dlock_tx_barrier");
  EXPECT_EQ(pg_barrier(conn, {"p", 0, Op::try_, ""}, try_), Outcome::unknown);
  EXPECT_EQ(pg_barrier(conn, {"p", 0, Op::try_, ""}, try_), Outcome::success);
  EXPECT_EQ(pg.psql("SELECT count(*) FROM dlock_tx_barrier"), "1\n");
  EXPECT_EQ(notices, 0);
  PQfinish(conn);
}

// A server with few connection slots (20: the claims' lock client keeps up
// to 10, the log 4): a burst of 40 transactions waits for the log's
// connections instead of failing with "too many clients", and every one
// is decided.
TEST_F(TxPostgres, ABurstOfTransactionsStaysWithinTheServersConnections) {
  pg.set("max_connections", "20");
  pg.stop();
  pg.start();
  auto c = open();
  Tally tally;
  std::vector<std::thread> threads;
  for (int t = 0; t < 40; ++t)
    threads.emplace_back([&, t] { tally.add(c.run("burst-" + std::to_string(t), transfer(2))); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(tally.committed.load(), 40) << "alice's 100 pays all forty";
  expect_settled();
}

// Coordinators started together on a fresh log (a deployment's first
// start) all open. The log's id is inserted by whichever comes first; here
// that insert is held open (a trigger sleeps) while the others insert
// theirs, which wait for it and do nothing: they once answered "the log has
// no id", as their statement's snapshot predates the row.
TEST_F(TxPostgres, CoordinatorsOpeningANewLogTogetherAllOpen) {
  { auto first = open(); }
  pg.psql(
      "DELETE FROM dlock_tx_meta; CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS "
      "$$BEGIN PERFORM pg_sleep(0.3); RETURN NEW; END$$; "
      "CREATE TRIGGER slow BEFORE INSERT ON dlock_tx_meta FOR EACH ROW EXECUTE FUNCTION slow()");
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      auto c = Coordinator::open(pg.url());
      if (!c.ok()) errors[t] = c.status().to_string();
    });
  for (auto& th : threads) th.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(pg.psql("SELECT count(*) FROM dlock_tx_meta WHERE key = 'log_id'"), "1\n");
}

// A role that may connect but not create tables (PostgreSQL 15's public
// schema): opening the log is refused with the server's reason, and
// nothing is left half made.
TEST_F(TxPostgres, ARoleThatMayNotCreateTheTablesGetsAClearError) {
  pg.psql("CREATE ROLE clerk LOGIN");
  auto c = Coordinator::open("postgres://clerk@127.0.0.1:" + std::to_string(pg.port()) + "/postgres");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.code(), Errc::permission_denied) << c.status().to_string();
  EXPECT_NE(c.status().message().find("permission denied"), std::string::npos) << c.status().to_string();
  EXPECT_EQ(pg.psql("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'dlock_tx%'"), "0\n");
}

// create_if_missing = false (the read-only tools): a database without the
// log's tables is invalid_argument saying so, and nothing is created there
// (no log table, no lock table, no function); a log that exists opens as
// usual.
TEST_F(TxPostgres, OpeningOnlyAnExistingLogCreatesNothing) {
  CoordinatorOptions only_existing;
  only_existing.create_if_missing = false;
  const std::string created =
      "SELECT (SELECT count(*) FROM pg_class WHERE relname LIKE 'dlock%') + (SELECT count(*) FROM pg_proc WHERE "
      "proname LIKE 'dlock%')";
  auto missing = Coordinator::open(pg.url(), only_existing);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.code(), Errc::invalid_argument) << missing.status().to_string();
  EXPECT_NE(missing.status().message().find("no transaction log at "), std::string::npos)
      << missing.status().to_string();
  EXPECT_NE(missing.status().message().find("(nothing was created)"), std::string::npos)
      << missing.status().to_string();
  EXPECT_EQ(pg.psql(created), "0\n");

  {
    auto c = open();
    ASSERT_TRUE(c.run("e1", transfer(10)).ok());
  }
  expect_existing_log_used(pg.url(), alice, bob);
  expect_settled();
}

TEST_F(TxPostgres, AnUnreachableServerIsAClearError) {
  pg.stop();
  auto c = Coordinator::open(pg.url());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.code(), Errc::unavailable) << c.status().to_string();
}

}  // namespace
}  // namespace dlock::tx

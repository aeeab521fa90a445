// The coordinator under protocol faults that are neither crashes nor
// pauses of its own, on a real PostgreSQL server: two 2PC transactions
// whose branches lock rows in opposite orders (a cycle PostgreSQL cannot
// see, since it runs through the coordinator), a participant's server
// frozen in the middle of a branch's statement, the log's answer to the
// decision lost after the decision was written (a proxy between the
// coordinator and the log), and in-process calls slower than the time they
// were given. Each call must end by its bound, and what run() says must be
// what the log ends with.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "dlock/tx.hpp"
#include "integration/tx_bank.hpp"
#include "proxy.hpp"
#include "support/postgres_server.hpp"
#include "support/tcp_fault.hpp"
#include "support/temp_dir.hpp"

namespace dlock::tx {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One statement of a branch's work: success when it changed one row.
Outcome run_sql(pg_conn* conn, const std::string& sql) {
  PGresult* r = PQexec(conn, sql.c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK && std::string(PQcmdTuples(r)) == "1";
  PQclear(r);
  return ok ? Outcome::success : Outcome::failure;
}

// Waits until `n` parties have arrived, or `limit` passed (so that a test
// of broken code fails instead of hanging).
class Meeting {
 public:
  explicit Meeting(int n) : left_(n) {}
  bool arrive_and_wait(std::chrono::milliseconds limit) {
    std::unique_lock lock(mu_);
    if (--left_ <= 0) cv_.notify_all();
    return cv_.wait_for(lock, limit, [&] { return left_ <= 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

class TxFault2pc : public ::testing::Test {
 protected:
  TxFault2pc() {
    pg.set("max_prepared_transactions", "10");
    pg.stop();
    pg.start();
    pg.psql("CREATE DATABASE stock");
    pg.psql("CREATE DATABASE payment");
    pg.psql("CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL); INSERT INTO items VALUES (1, 10)", "stock");
    pg.psql("CREATE TABLE acct (id int PRIMARY KEY, cents int NOT NULL); INSERT INTO acct VALUES (1, 0)", "payment");
  }
  ~TxFault2pc() override {
    for (int pid : stopped) ::kill(pid, SIGCONT);
  }
  std::string url(const std::string& db) const {
    return "postgres://postgres@127.0.0.1:" + std::to_string(pg.port()) + "/" + db;
  }
  Coordinator open(CoordinatorOptions o) const {
    auto c = Coordinator::open("sqlite://" + dir.file("tx.db"), std::move(o));
    if (!c.ok()) throw Error(c.status());
    if (Status s = c->add_database("stock", url("stock")); !s.ok()) throw Error(s);
    if (Status s = c->add_database("payment", url("payment")); !s.ok()) throw Error(s);
    return std::move(*c);
  }
  int stock() const { return std::stoi(pg.psql("SELECT n FROM items WHERE id = 1", "stock")); }
  int paid() const { return std::stoi(pg.psql("SELECT cents FROM acct WHERE id = 1", "payment")); }
  std::string prepared() const { return pg.psql("SELECT count(*) FROM pg_prepared_xacts"); }
  // Ends every session but psql's own: what a test of broken code needs to
  // get its stuck calls back.
  void terminate_sessions() const {
    pg.psql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND "
        "backend_type = 'client backend'");
  }

  test::PostgresServer pg;
  test::TempDir dir;
  std::vector<int> stopped;  // backends SIGSTOPped by a test, resumed at the end
};

XaBranch take_stock(Meeting* before = nullptr) {
  return {"stock", [before](pg_conn* c) {
            if (before && !before->arrive_and_wait(5s)) return Outcome::unknown;
            return run_sql(c, "UPDATE items SET n = n - 1 WHERE id = 1");
          }};
}
XaBranch pay(Meeting* before = nullptr) {
  return {"payment", [before](pg_conn* c) {
            if (before && !before->arrive_and_wait(5s)) return Outcome::unknown;
            return run_sql(c, "UPDATE acct SET cents = cents + 1 WHERE id = 1");
          }};
}

// Order A takes the stock row then the payment row, order B the other way
// round. Both first branches are prepared (holding their row) before either
// second branch runs, so each second branch waits for the other's prepared
// transaction: a cycle through the coordinator that PostgreSQL's deadlock
// detector cannot see. The Try deadline must end it: both calls return in
// time, and nothing is left prepared or half done.
TEST_F(TxFault2pc, OppositeRowOrdersThroughPreparedTransactionsEndByTheTryDeadline) {
  CoordinatorOptions o;
  o.timeout = 2s;
  o.finish_within = 1s;
  auto c = open(o);
  Meeting second_branches(2);
  const auto t0 = Clock::now();
  auto a = std::async(std::launch::async, [&] { return c.run_2pc("a", {take_stock(), pay(&second_branches)}); });
  auto b = std::async(std::launch::async, [&] { return c.run_2pc("b", {pay(), take_stock(&second_branches)}); });
  // Broken code never returns: free its calls so that the test can end.
  if (a.wait_for(10s) != std::future_status::ready || b.wait_for(1s) != std::future_status::ready) terminate_sessions();
  auto ra = a.get();
  auto rb = b.get();
  const double took = seconds_since(t0);
  EXPECT_LT(took, 2 + 1 + 2.5) << "Try timeout 2 s, finish_within 1 s";
  int committed = 0;
  for (const auto* r : {&ra, &rb}) {
    EXPECT_TRUE(r->ok() || r->code() == Errc::aborted) << r->status().to_string();
    committed += r->ok();
  }
  for (const char* gid : {"a", "b"}) {
    auto info = recover_until_finished(c, gid);
    ASSERT_TRUE(info.ok()) << info.status().to_string();
  }
  (void)c.recover();  // and any prepared transaction of ours that the log does not know
  EXPECT_EQ(prepared(), "0\n") << "no prepared transaction keeps its locks";
  EXPECT_EQ(stock(), 10 - committed) << "each committed order took one item, the others none";
  EXPECT_EQ(paid(), committed) << "each committed order paid once, the others not at all";
}

// The participant's server process serving a branch stops (SIGSTOP) while
// the branch's statement is in flight: run_2pc() must still return by the
// Try deadline plus finish_within, aborted, and leave nothing once the
// server is back.
TEST_F(TxFault2pc, AParticipantFrozenMidStatementIsCutAtTheTryDeadline) {
  CoordinatorOptions o;
  o.timeout = 1s;
  o.finish_within = 1s;
  auto c = open(o);
  std::mutex mu;
  XaBranch frozen{"stock", [&](pg_conn* conn) {
                    PGresult* r = PQexec(conn, "SELECT pg_backend_pid()");
                    const int pid = PQresultStatus(r) == PGRES_TUPLES_OK ? std::atoi(PQgetvalue(r, 0, 0)) : 0;
                    PQclear(r);
                    if (pid <= 0 || ::kill(pid, SIGSTOP) != 0) return Outcome::unknown;
                    {
                      std::lock_guard lock(mu);
                      stopped.push_back(pid);
                    }
                    return run_sql(conn, "UPDATE items SET n = n - 1 WHERE id = 1");
                  }};
  std::atomic<bool> returned{false};
  std::thread thaw([&] {  // broken code returns only once the server does
    for (auto until = Clock::now() + 8s; Clock::now() < until && !returned;) std::this_thread::sleep_for(20ms);
    std::lock_guard lock(mu);
    for (int pid : stopped) ::kill(pid, SIGCONT);
  });
  const auto t0 = Clock::now();
  auto r = c.run_2pc("frozen", {frozen, pay()});
  const double took = seconds_since(t0);
  returned = true;
  thaw.join();
  EXPECT_LT(took, 1 + 1 + 1.5) << "Try timeout 1 s, finish_within 1 s; the server stayed frozen for 8 s";
  EXPECT_EQ(r.code(), Errc::aborted) << r.status().to_string();
  auto info = recover_until_finished(c, "frozen");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->state, State::aborted);
  (void)c.recover();
  // The frozen session rolls back once it runs again and finds its client gone.
  for (auto until = Clock::now() + 10s; prepared() != "0\n" && Clock::now() < until;) {
    (void)c.recover();
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(prepared(), "0\n");
  EXPECT_EQ(stock(), 10);
  EXPECT_EQ(paid(), 0);
}

// The log on PostgreSQL, reached through a proxy that can lose the log's
// answers after the statements ran.
class TxFaultLog : public TwoBanksTest {
 protected:
  TxFaultLog() : proxy("127.0.0.1", static_cast<std::uint16_t>(pg.port())) {
    link = proxy.add_link("log");
    proxy.start();
  }
  std::string log_url() const { return "postgres://postgres@127.0.0.1:" + std::to_string(link) + "/postgres"; }
  Coordinator open(CoordinatorOptions o, const std::string& url) {
    auto c = Coordinator::open(url, std::move(o));
    if (!c.ok()) throw Error(c.status());
    c->add_participant("alice", alice.debit());
    c->add_participant("bob", bob.credit());
    return std::move(*c);
  }
  std::string logged_state(const std::string& gid) const {
    return pg.psql("SELECT state FROM public.dlock_tx WHERE gid = '" + gid + "'");
  }

  test::PostgresServer pg;
  torture::Proxy proxy;
  int link = 0;
};

// Right after the last Try, the log's answers are lost for 300 ms: the
// commit decision executes, its answer does not come back. run() must read
// the decision back and answer what it is (committed), never an error that
// invites the caller to run the order again.
TEST_F(TxFaultLog, ADecisionWhoseAnswerIsLostIsReadBackAndTold) {
  CoordinatorOptions o;
  o.timeout = 3s;
  o.finish_within = 3s;  // the claim keeps its default lease: the outage must not cost it
  std::thread heal;
  o.on_step = [&](std::string_view, std::string_view step) {
    if (step != "after try 1") return;
    proxy.drop_replies("log", true);
    heal = std::thread([&] {
      std::this_thread::sleep_for(300ms);
      proxy.drop_replies("log", false);
    });
  };
  auto c = open(o, log_url());
  auto r = c.run("t1", transfer(30));
  if (heal.joinable()) heal.join();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, State::committed);
  EXPECT_EQ(logged_state("t1"), "committed\n");
  EXPECT_EQ(alice.column("balance"), 70);
  EXPECT_EQ(bob.column("balance"), 80);
  expect_settled();
}

// The same, but the log stays unreachable past finish_within: run() cannot
// know whether the commit decision was written, and must say so (in_doubt),
// not "will abort". The decision had been written: recovery commits it.
// Four transactions reach their decision together, so that the decisions
// queued behind the first go out as one batch; every answer is lost for
// 300 ms. Each transaction reads its own decision back and is told it.
TEST_F(TxFaultLog, ABatchOfDecisionsWhoseAnswerIsLostIsReadBackForEach) {
  CoordinatorOptions o;
  o.timeout = 5s;
  o.finish_within = 5s;
  o.retry_base = 1ms;
  Meeting tried(4);
  std::atomic<bool> dropped{false};
  std::thread heal;
  std::mutex heal_mu;
  o.on_step = [&](std::string_view, std::string_view step) {
    if (step != "after try 1") return;
    EXPECT_TRUE(tried.arrive_and_wait(10s));
    std::lock_guard lk(heal_mu);
    if (dropped.exchange(true)) return;
    proxy.drop_replies("log", true);
    heal = std::thread([&] {
      std::this_thread::sleep_for(300ms);
      proxy.drop_replies("log", false);
    });
  };
  auto c = open(o, log_url());
  std::vector<Result<State>> answers(4, Status(Errc::unavailable, "not run"));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back(
        [&, t] { answers[static_cast<std::size_t>(t)] = c.run("b" + std::to_string(t), transfer(5)); });
  for (auto& th : threads) th.join();
  if (heal.joinable()) heal.join();
  for (int t = 0; t < 4; ++t) {
    const auto& r = answers[static_cast<std::size_t>(t)];
    ASSERT_TRUE(r.ok()) << "b" << t << ": " << r.status().to_string();
    EXPECT_TRUE(*r == State::committed || *r == State::committing);
  }
  auto driven = c.recover();  // finishes any left committing (its end record lost too)
  ASSERT_TRUE(driven.ok()) << driven.status().to_string();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(logged_state("b" + std::to_string(t)), "committed\n");
  EXPECT_EQ(alice.column("balance"), 80);
  EXPECT_EQ(bob.column("balance"), 70);
  expect_settled();
}

TEST_F(TxFaultLog, ADecisionTheLogCannotConfirmIsInDoubtAndRecoveryFinishesIt) {
  CoordinatorOptions o;
  o.timeout = 3s;
  o.finish_within = 1s;
  o.claim_lease = 1s;
  bool cut = false;
  o.on_step = [&](std::string_view gid, std::string_view step) {
    if (cut && gid == "t2" && step == "after try 1") proxy.drop_replies("log", true);
  };
  auto c = open(o, log_url());
  // A coordinator that has run before, as in a service: the log's
  // statements are prepared on its connection, so the decision's write is
  // the statement itself (a first one is prepared in a round trip of its
  // own, and a Parse whose answer is lost ran nothing).
  ASSERT_TRUE(c.run("warm", transfer(1)).ok());
  cut = true;
  const auto t0 = Clock::now();
  auto r = c.run("t2", transfer(30));
  const double took = seconds_since(t0);
  proxy.drop_replies("log", false);
  EXPECT_EQ(r.code(), Errc::in_doubt) << r.status().to_string();
  EXPECT_EQ(r.status().next_step(), NextStep::unknown);
  EXPECT_LT(took, 3 + 1 + 2.0) << "bounded by the Try phase and finish_within";
  auto other = open({}, pg.url());  // direct: the proxy is out of the way
  auto info = recover_until_finished(other, "t2");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->state, State::committed) << "the decision had been written";
  EXPECT_EQ(alice.column("balance"), 69);
  EXPECT_EQ(bob.column("balance"), 81);
  expect_settled();
}

// In-process participants are not interruptible; the coordinator must
// still give each call the deadline it has, and start no Confirm past
// finish_within, nor spend more than finish_within per transaction in one
// recovery pass.
class TxFaultCalls : public TwoBanksTest {};

TEST_F(TxFaultCalls, EachCallIsGivenItsDeadlineAndNoneStartsPastFinishWithin) {
  CoordinatorOptions o;
  o.timeout = 2s;
  o.finish_within = 500ms;
  o.retry_base = 10ms;
  o.retry_cap = 20ms;
  auto c = Coordinator::open("sqlite://" + dir.file("tx.db"), o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  std::mutex mu;
  std::vector<std::pair<Op, Clock::time_point>> seen;  // each call's op and deadline
  std::atomic<int> confirms{0};
  auto record = [&](const BranchContext& ctx) {
    std::lock_guard lock(mu);
    seen.emplace_back(ctx.op, ctx.deadline);
  };
  Participant slow{[&](const BranchContext& ctx) {
                     record(ctx);
                     return Outcome::success;
                   },
                   [&](const BranchContext& ctx) {
                     record(ctx);
                     ++confirms;
                     std::this_thread::sleep_for(300ms);  // and no answer
                     return Outcome::unknown;
                   },
                   [](const BranchContext&) { return Outcome::success; }};
  for (const char* name : {"p0", "p1", "p2"}) c->add_participant(name, slow);
  const auto t0 = Clock::now();
  auto r = c->run("slow", {{"p0", "1"}, {"p1", "1"}, {"p2", "1"}});
  const double took = seconds_since(t0);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, State::committing) << "decided; recovery confirms the rest";
  // Two Confirms fit in 500 ms (0-300, 300-600); the third would start past it.
  EXPECT_LE(confirms.load(), 2);
  // Slack for a loaded host (sanitizers, 2 cores); unbounded it ran for seconds.
  EXPECT_LT(took, 0.5 + 0.3 + 1.0) << "finish_within 500 ms, one call of 300 ms may overrun it";
  {
    std::lock_guard lock(mu);
    ASSERT_GE(seen.size(), 4u);
    for (const auto& [op, deadline] : seen) {
      EXPECT_NE(deadline, Clock::time_point::max()) << to_string(op) << " was given no deadline";
      if (op == Op::try_) {
        EXPECT_LE(deadline, t0 + 2s + 50ms) << "a Try's deadline is the Try phase's end";
      } else {
        EXPECT_LE(deadline, t0 + 500ms + 300ms) << "a Confirm's is the end of finish_within";
      }
    }
  }
  // One recovery pass over it spends at most finish_within on its calls.
  (void)c->retry_now("slow");
  const auto t1 = Clock::now();
  auto n = c->recover();
  EXPECT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_LT(seconds_since(t1), 0.5 + 0.3 + 1.0);
}

// Three HTTP participants whose hosts are gone (their listeners drop
// SYNs), each call allowed 3 s: with a Try timeout of 3 s and finish_within
// 2 s, run() must return in about 5 s (it took 60 s: every Cancel waited
// its whole connect timeout, over and over), and one recover() pass over
// the transaction in about finish_within (it took 9 s).
TEST_F(TxFaultCalls, ParticipantsThatDropSynsHoldNeitherRunNorRecoveryPastTheirBounds) {
  test::TcpFault gone[3];
  CoordinatorOptions o;
  o.timeout = 3s;
  o.finish_within = 2s;
  auto c = Coordinator::open("sqlite://" + dir.file("tx.db"), o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  std::vector<Branch> branches;
  for (int i = 0; i < 3; ++i) {
    gone[i].stall();
    HttpParticipant p;
    const std::string base = "http://127.0.0.1:" + std::to_string(gone[i].port());
    p.try_url = base + "/try";
    p.confirm_url = base + "/confirm";
    p.cancel_url = base + "/cancel";
    p.timeout = 3s;
    auto calls = http_participant(p);
    ASSERT_TRUE(calls.ok()) << calls.status().to_string();
    c->add_participant("gone" + std::to_string(i), *calls);
    branches.push_back({"gone" + std::to_string(i), "1"});
  }
  const auto t0 = Clock::now();
  auto r = c->run("gone", branches);
  const double took = seconds_since(t0);
  EXPECT_EQ(r.code(), Errc::aborted) << r.status().to_string();
  EXPECT_LT(took, 3 + 2 + 1.5) << "Try timeout 3 s, finish_within 2 s";
  (void)c->retry_now("gone");
  const auto t1 = Clock::now();
  auto n = c->recover();
  EXPECT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_LT(seconds_since(t1), 2 + 1.5) << "a recovery pass gives a transaction finish_within";
  auto info = c->show("gone");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, State::aborting) << "its Cancels wait for the hosts to come back";
}

}  // namespace
}  // namespace dlock::tx

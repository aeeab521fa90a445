// TCC transactions with the log in a real SQLite file and participants that
// keep their money in their own SQLite databases behind the barrier.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <filesystem>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/tx.hpp"
#include "integration/tx_bank.hpp"
#include "support/temp_dir.hpp"
#include "tx/sqlite_log.hpp"

namespace dlock::tx {
namespace {

using namespace std::chrono_literals;

class TxSqlite : public TwoBanksTest {
 protected:
  std::string url() const { return "sqlite://" + dir.file("tx.db"); }
  Coordinator open(CoordinatorOptions o = {}) {
    auto c = Coordinator::open(url(), std::move(o));
    if (!c.ok()) throw Error(c.status());
    c->add_participant("alice", alice.debit());
    c->add_participant("bob", bob.credit());
    return std::move(*c);
  }
};

TEST_F(TxSqlite, AllTriesSucceedAndEveryBranchIsConfirmed) {
  auto c = open();
  auto r = c.run("t1", transfer(30));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, State::committed);
  EXPECT_EQ(alice.column("balance"), 70);
  EXPECT_EQ(bob.column("balance"), 80);
  expect_settled();
  auto info = c.show("t1");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->state, State::committed);
  ASSERT_EQ(info->branches.size(), 2u);
  EXPECT_TRUE(info->branches[0].done && info->branches[1].done);
  EXPECT_EQ(info->branches[1].participant, "bob");
  EXPECT_EQ(c.stats().committed, 1u);
}

TEST_F(TxSqlite, AFailedTryRollsEveryBranchBack) {
  auto c = open();
  auto r = c.run("t2", transfer(500));  // alice has 100
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::aborted);
  EXPECT_NE(r.status().message().find("branch 0 Try failed"), std::string::npos) << r.status().to_string();
  EXPECT_EQ(alice.column("balance"), 100);
  EXPECT_EQ(bob.column("balance"), 50);
  expect_settled();
  auto info = c.show("t2");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, State::aborted);
  EXPECT_NE(info->reason.find("Try failed"), std::string::npos);
}

TEST_F(TxSqlite, BadInputIsRefusedAndLogsNothing) {
  auto c = open();
  EXPECT_EQ(c.run("", transfer(1)).code(), Errc::invalid_argument);
  EXPECT_EQ(c.run(std::string(121, 'g'), transfer(1)).code(), Errc::invalid_argument);
  EXPECT_EQ(c.run("t", {}).code(), Errc::invalid_argument);
  EXPECT_EQ(c.run("t", {{"carol", "1"}}).code(), Errc::invalid_argument);
  EXPECT_EQ(c.show("t").code(), Errc::not_held);
  ASSERT_TRUE(c.run("t", transfer(1)).ok());
  auto again = c.run("t", transfer(1));
  EXPECT_EQ(again.code(), Errc::invalid_argument) << "a gid is used once";
  EXPECT_EQ(alice.column("balance"), 99) << "the reused gid moved no money";
  EXPECT_EQ(Coordinator::open("redis://127.0.0.1:1").code(), Errc::invalid_argument);
  EXPECT_EQ(Coordinator::open("sqlite://relative/tx.db").code(), Errc::invalid_argument);
  CoordinatorOptions zero;
  zero.timeout = 0ms;
  EXPECT_EQ(Coordinator::open(url(), zero).code(), Errc::invalid_argument);
}

TEST_F(TxSqlite, ADecidedCommitIsFinishedByRecoveryInAnotherCoordinator) {
  CoordinatorOptions o;
  o.finish_within = 200ms;  // return after the first round of Confirms: bob's retry falls after it
  o.retry_base = 1000ms;
  auto first = open(o);
  // Bob's Confirm goes unanswered: the decision is durable, the work is not.
  bool first_confirm = true;
  first.add_participant("bob", {bob.credit().try_,
                                [&](const BranchContext& ctx) {
                                  if (std::exchange(first_confirm, false)) return Outcome::unknown;
                                  return bob.credit().confirm(ctx);
                                },
                                bob.credit().cancel});
  auto r = first.run("t3", transfer(10));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, State::committing);
  EXPECT_EQ(bob.column("incoming"), 10);
  auto unfinished = first.list_unfinished();
  ASSERT_TRUE(unfinished.ok());
  ASSERT_EQ(unfinished->size(), 1u);
  EXPECT_EQ((*unfinished)[0].branches[1].attempts, 1);
  EXPECT_FALSE((*unfinished)[0].branches[1].last_error.empty());
  EXPECT_TRUE((*unfinished)[0].branches[0].done) << "alice's Confirm went through and is not sent again";

  auto second = open();
  ASSERT_TRUE(second.retry_now("t3").ok());
  auto n = second.recover();
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(second.show("t3")->state, State::committed);
  EXPECT_EQ(bob.column("balance"), 60);
  expect_settled();
  EXPECT_EQ(second.retry_now("t3").code(), Errc::not_held) << "finished";
}

TEST_F(TxSqlite, ACoordinatorThatDiesDuringTheTriesIsAbortedByRecovery) {
  // The child process tries alice, then dies in bob's Try: no decision.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    CoordinatorOptions o;
    o.claim_lease = 300ms;
    auto c = Coordinator::open(url(), o);
    if (!c.ok()) ::_exit(2);
    c->add_participant("alice", alice.debit());
    c->add_participant("bob", {[](const BranchContext&) -> Outcome { ::_exit(0); }, {}, {}});
    (void)c->run("t4", transfer(40));
    ::_exit(3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(alice.column("frozen"), 40) << "alice's Try ran";

  auto c = open();
  // The dead coordinator's claim lapses within its lease; until then the
  // transaction is left alone.
  auto info = recover_until_finished(c, "t4");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, State::aborted);
  EXPECT_NE(info->reason.find("went away"), std::string::npos) << info->reason;
  EXPECT_EQ(alice.column("balance"), 100) << "alice's Try was cancelled";
  expect_settled();
}

TEST_F(TxSqlite, ACoordinatorPausedPastItsClaimIsOvertakenAndWritesNothing) {
  // The child stops itself (as SIGSTOP would) after alice's Try; recovery
  // here takes the transaction over once the claim lapses and aborts it;
  // then the child runs on, Tries bob and would decide commit.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    CoordinatorOptions o;
    o.claim_lease = 300ms;
    o.on_step = [](std::string_view, std::string_view step) {
      if (step == "after try 0") ::raise(SIGSTOP);
    };
    auto c = Coordinator::open(url(), o);
    if (!c.ok()) ::_exit(2);
    c->add_participant("alice", alice.debit());
    c->add_participant("bob", bob.credit());
    auto r = c->run("t6", transfer(25));
    ::_exit(r.ok() ? 3 : r.code() == Errc::lease_lost ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, WUNTRACED), pid);
  ASSERT_TRUE(WIFSTOPPED(status)) << status;
  auto c = open();
  auto taken_over = recover_until_finished(c, "t6");
  ASSERT_TRUE(taken_over.ok()) << taken_over.status().to_string();
  ASSERT_EQ(taken_over->state, State::aborted);
  ::kill(pid, SIGCONT);
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the paused coordinator learns it lost the transaction";
  EXPECT_EQ(c.show("t6")->state, State::aborted) << "and changed nothing in the log";
  EXPECT_EQ(alice.column("balance"), 100);
  EXPECT_EQ(bob.column("balance"), 50);
  expect_settled();  // bob's incoming is 0: the late Try found its Cancel first and did nothing
  EXPECT_EQ(bob.calls, 0) << "bob was never tried before the takeover: its Cancel was empty";
}

TEST_F(TxSqlite, AConfirmThatKeepsFailingIsAlertedAndRetried) {
  CoordinatorOptions o;
  o.finish_within = 300ms;
  o.retry_base = 5ms;
  o.retry_cap = 20ms;
  o.alert_after = 3;
  std::vector<Alert> alerts;
  std::mutex mu;
  o.on_alert = [&](const Alert& a) {
    std::lock_guard lock(mu);
    alerts.push_back(a);
  };
  auto c = open(o);
  c.add_participant("bob",
                    {bob.credit().try_, [](const BranchContext&) { return Outcome::failure; }, bob.credit().cancel});
  auto r = c.run("t5", transfer(5));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, State::committing) << "a failing Confirm never turns a commit into an abort";
  std::lock_guard lock(mu);
  ASSERT_FALSE(alerts.empty());
  EXPECT_EQ(alerts[0].gid, "t5");
  EXPECT_EQ(alerts[0].branch, 1);
  EXPECT_EQ(alerts[0].op, Op::confirm);
  EXPECT_EQ(alerts[0].attempts, 3);
  EXPECT_NE(alerts[0].last_error.find("contract violation"), std::string::npos) << alerts[0].last_error;
  EXPECT_GE(c.stats().alerts, 1u);
}

TEST_F(TxSqlite, TheBarrierMakesCallsIdempotentAndBlocksATryAfterItsCancel) {
  const auto d = bob.credit();
  const BranchContext cancel{"g", 0, Op::cancel, "7"};
  EXPECT_EQ(d.cancel(cancel), Outcome::success) << "empty compensation";
  EXPECT_EQ(bob.calls, 0) << "nothing to undo: the business statement did not run";
  EXPECT_EQ(d.try_({"g", 0, Op::try_, "7"}), Outcome::success);
  EXPECT_EQ(bob.column("incoming"), 0) << "a Try after its Cancel does nothing (anti-suspension)";
  EXPECT_EQ(d.cancel(cancel), Outcome::success);
  EXPECT_EQ(bob.calls, 0);

  EXPECT_EQ(d.try_({"h", 0, Op::try_, "3"}), Outcome::success);
  EXPECT_EQ(d.try_({"h", 0, Op::try_, "3"}), Outcome::success);
  EXPECT_EQ(bob.column("incoming"), 3) << "a duplicate Try ran once";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(d.confirm({"h", 0, Op::confirm, "3"}), Outcome::success);
  EXPECT_EQ(bob.column("balance"), 53) << "a duplicate Confirm ran once";
  EXPECT_EQ(bob.calls, 2);
}

TEST_F(TxSqlite, AFailedTryLeavesNoBarrierRowSoItsCancelIsEmpty) {
  const auto d = alice.debit();
  EXPECT_EQ(d.try_({"k", 0, Op::try_, "1000"}), Outcome::failure);
  EXPECT_EQ(d.cancel({"k", 0, Op::cancel, "1000"}), Outcome::success);
  EXPECT_EQ(alice.column("balance"), 100) << "the Cancel of a rolled-back Try gives back nothing";
  EXPECT_EQ(alice.column("frozen"), 0);
}

TEST_F(TxSqlite, ALogWriteWithAStaleFenceChangesNothing) {
  auto log = detail::open_sqlite_log(dir.file("fence.db"), 1000ms);
  ASSERT_TRUE(log.ok()) << log.status().to_string();
  auto first = (*log)->create("f", transfer(1), 0ms);  // a claim that lapses at once
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(*first, 1u);
  EXPECT_EQ((*log)->create("f", transfer(1), 60s).code(), Errc::invalid_argument) << "a gid is logged once";
  auto taken = (*log)->claim("f", 60s);
  ASSERT_TRUE(taken.ok()) << taken.status().to_string();
  ASSERT_TRUE(taken->has_value());
  EXPECT_EQ(**taken, 2u) << "a takeover raises the fence";
  auto again = (*log)->claim("f", 60s);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value()) << "a live claim is not taken over";
  auto stale = (*log)->move("f", 1, State::trying, State::committing, {});
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(*stale) << "a coordinator paused past its claim cannot decide";
  auto stale_renewal = (*log)->renew("f", 1, 60s);
  ASSERT_TRUE(stale_renewal.ok());
  EXPECT_FALSE(*stale_renewal) << "nor keep its claim";
  auto renewed = (*log)->renew("f", 2, 60s);
  ASSERT_TRUE(renewed.ok());
  EXPECT_TRUE(*renewed);
  auto newer = (*log)->move("f", 2, State::trying, State::aborting, "taken over");
  ASSERT_TRUE(newer.ok());
  EXPECT_TRUE(*newer);
  auto late = (*log)->move("f", 1, State::aborting, State::aborted, {});
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(*late) << "fence 1 is below the 2 that wrote last";
  auto wrong_state = (*log)->move("f", 9, State::trying, State::committing, {});
  ASSERT_TRUE(wrong_state.ok());
  EXPECT_FALSE(*wrong_state) << "every move is a compare-and-set on the state";
  EXPECT_EQ((*log)->load("f")->state, State::aborting);
  ASSERT_TRUE((*log)->release("f", 2).ok());
  auto after_release = (*log)->claim("f", 60s);
  ASSERT_TRUE(after_release.ok());
  ASSERT_TRUE(after_release->has_value()) << "a released claim is taken at once";
  EXPECT_EQ(**after_release, 3u);
}

// During an upgrade, a coordinator of an earlier version drives under the
// dlock lease "dlock-tx/<gid>", with no claim in the record: recovery
// leaves the transaction alone while that lease is held.
TEST_F(TxSqlite, RecoveryLeavesATransactionAnEarlierVersionDrivesUnderItsLease) {
  {
    auto log = detail::open_sqlite_log(dir.file("tx.db"), 1000ms);
    ASSERT_TRUE(log.ok()) << log.status().to_string();
    ASSERT_TRUE((*log)->create("old", transfer(1), 0ms).ok());  // due, its claim lapsed
  }
  auto client = Client::try_connect(url());
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  auto lease = client->acquire("dlock-tx/old", 0ms);
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  auto c = open();
  auto n = c.recover();
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(*n, 0) << "the older coordinator's lease keeps it";
  EXPECT_EQ(c.show("old")->state, State::trying);
  ASSERT_TRUE(lease->release().ok());
  auto info = recover_until_finished(c, "old");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->state, State::aborted) << "once it is let go, presumed abort";
  expect_settled();
}

// A log written by 0.2.0 has no claim columns: opening it adds them, even
// when opening only what exists, and it works on.
TEST_F(TxSqlite, ALogOfAnEarlierVersionGainsItsClaimColumnsWhenOpened) {
  ASSERT_TRUE(open().run("before", transfer(1)).ok());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir.file("tx.db").c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int rc =
      sqlite3_exec(db, "ALTER TABLE dlock_tx DROP COLUMN claim_ms; ALTER TABLE dlock_tx DROP COLUMN claim_boot",
                   nullptr, nullptr, &error);
  EXPECT_EQ(rc, SQLITE_OK) << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
  CoordinatorOptions o;
  o.create_if_missing = false;
  auto c = open(o);
  auto r = c.run("after", transfer(1));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, State::committed);
  EXPECT_EQ(c.show("before")->state, State::committed) << "what the old log held is still there";
  EXPECT_EQ(alice.column("balance"), 98);
}

// A transaction that lasts longer than its claim's lease keeps the claim:
// recovery running beside it all along never takes it over.
TEST_F(TxSqlite, ATransactionLongerThanItsClaimLeaseIsNotTakenOver) {
  CoordinatorOptions o;
  o.claim_lease = 600ms;
  auto driver = open(o);
  std::atomic<bool> trying{false};
  driver.add_participant("bob", {[&](const BranchContext& ctx) {
                                   trying = true;
                                   std::this_thread::sleep_for(2000ms);  // over three leases
                                   return bob.credit().try_(ctx);
                                 },
                                 bob.credit().confirm, bob.credit().cancel});
  auto recovery = open(o);
  std::atomic<bool> done{false};
  int passes = 0;
  std::thread recovering([&] {
    while (!trying && !done) std::this_thread::sleep_for(1ms);
    for (; !done; ++passes) {
      (void)recovery.retry_now("long");
      auto n = recovery.recover();
      EXPECT_TRUE(n.ok()) << n.status().to_string();
      std::this_thread::sleep_for(50ms);
    }
  });
  auto r = driver.run("long", transfer(10));
  done = true;
  recovering.join();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, State::committed);
  EXPECT_GT(passes, 5) << "recovery looked at it all along";
  EXPECT_EQ(recovery.stats().recovered, 0u) << "and never took it over";
  EXPECT_EQ(alice.column("balance"), 90);
  EXPECT_EQ(bob.column("balance"), 60);
  expect_settled();
}

// The log file deleted under a running coordinator: its next transaction
// is an error saying so, never a success written to a file nobody reads,
// and nothing was tried.
TEST_F(TxSqlite, ALogFileDeletedUnderTheCoordinatorIsAnErrorNotALostWrite) {
  auto c = open();
  ASSERT_TRUE(c.run("d1", transfer(10)).ok());
  for (const char* f : {"tx.db", "tx.db-wal", "tx.db-shm"}) ::unlink(dir.file(f).c_str());
  const int calls = alice.calls + bob.calls;
  auto r = c.run("d2", transfer(10));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("deleted or replaced"), std::string::npos) << r.status().to_string();
  EXPECT_EQ(alice.calls + bob.calls, calls) << "no Try ran";
  EXPECT_EQ(alice.column("balance"), 90);
  EXPECT_EQ(bob.column("balance"), 60);
  expect_settled();
}

// The names in `dir` starting with `prefix`, sorted and joined by spaces.
std::string files_named(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().starts_with(prefix)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : " ") + n;
  return out;
}

// One text answer of `sql` on the SQLite file at `path`, opened read-only.
std::string sqlite_answer(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
        sqlite3_column_text(st, 0) != nullptr)
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

// create_if_missing = false (the read-only tools): a log that is not there,
// in a directory that is not there, or a SQLite file that holds something
// else is invalid_argument saying so, and nothing is created: no file, no
// table, no change of journal mode. A log that exists opens as usual.
TEST_F(TxSqlite, OpeningOnlyAnExistingLogCreatesNothing) {
  CoordinatorOptions only_existing;
  only_existing.create_if_missing = false;

  auto missing = Coordinator::open(url(), only_existing);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.code(), Errc::invalid_argument) << missing.status().to_string();
  EXPECT_NE(missing.status().message().find("no transaction log at " + dir.file("tx.db") + " (nothing was created)"),
            std::string::npos)
      << missing.status().to_string();
  EXPECT_EQ(files_named(dir.path(), "tx.db"), "") << "no log file, journal or wake-up file";

  auto no_dir = Coordinator::open("sqlite://" + dir.file("nodir/tx.db"), only_existing);
  ASSERT_FALSE(no_dir.ok());
  EXPECT_EQ(no_dir.code(), Errc::invalid_argument) << no_dir.status().to_string();
  EXPECT_NE(no_dir.status().message().find("no transaction log at " + dir.file("nodir/tx.db")), std::string::npos)
      << no_dir.status().to_string();
  EXPECT_FALSE(std::filesystem::exists(dir.file("nodir")));

  // A mistyped path that names another database (here alice's): left as it was.
  const std::string journal = sqlite_answer(dir.file("alice.db"), "PRAGMA journal_mode");
  auto other = Coordinator::open("sqlite://" + dir.file("alice.db"), only_existing);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.code(), Errc::invalid_argument) << other.status().to_string();
  EXPECT_NE(other.status().message().find("no transaction log at " + dir.file("alice.db")), std::string::npos)
      << other.status().to_string();
  EXPECT_EQ(sqlite_answer(dir.file("alice.db"), "SELECT count(*) FROM sqlite_master WHERE name LIKE 'dlock%'"), "0")
      << "no log table, no lock table";
  EXPECT_EQ(sqlite_answer(dir.file("alice.db"), "PRAGMA journal_mode"), journal);
  EXPECT_EQ(files_named(dir.path(), "alice.db-"), "") << "no wake-up file beside it";

  {
    auto c = open();
    ASSERT_TRUE(c.run("e1", transfer(10)).ok());
  }
  expect_existing_log_used(url(), alice, bob);
  expect_settled();
}

// Participants that record the threads calling them; each Try waits (up
// to 10 s) until `together` Tries are in flight at once.
struct Rendezvous {
  int together = 1;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  std::set<std::thread::id> threads;
  std::atomic<int> confirms{0}, cancels{0};
  Participant participant(bool fail_try = false) {
    return {[this, fail_try](const BranchContext&) {
              std::unique_lock lk(mu);
              threads.insert(std::this_thread::get_id());
              ++arrived;
              cv.notify_all();
              const bool met = cv.wait_for(lk, 10s, [&] { return arrived >= together; });
              return met && !fail_try ? Outcome::success : Outcome::failure;
            },
            [this](const BranchContext&) {
              std::lock_guard lk(mu);
              threads.insert(std::this_thread::get_id());
              ++confirms;
              return Outcome::success;
            },
            [this](const BranchContext&) {
              ++cancels;
              return Outcome::success;
            }};
  }
};

TEST_F(TxSqlite, ByDefaultEveryCallIsMadeOnTheCallersThreadInOrder) {
  auto c = open();
  Rendezvous r;
  for (const char* p : {"a", "b", "c"}) c.add_participant(p, r.participant());
  auto state = c.run("seq", {{"a", ""}, {"b", ""}, {"c", ""}});
  ASSERT_TRUE(state.ok()) << state.status().to_string();
  EXPECT_EQ(r.confirms, 3);
  EXPECT_EQ(r.threads, std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST_F(TxSqlite, ParallelBranchesCallEveryTryAtOnceThenEveryConfirm) {
  CoordinatorOptions o;
  o.parallel_branches = true;
  auto c = open(o);
  Rendezvous r;
  r.together = 3;  // met only if the three Tries are in flight together
  for (const char* p : {"a", "b", "c"}) c.add_participant(p, r.participant());
  for (int i = 0; i < 3; ++i) {  // the pool's threads serve the next transaction too
    r.arrived = 0;
    auto state = c.run("par" + std::to_string(i), {{"a", ""}, {"b", ""}, {"c", ""}});
    ASSERT_TRUE(state.ok()) << state.status().to_string();
    EXPECT_EQ(*state, State::committed);
  }
  EXPECT_EQ(r.confirms, 9);
  EXPECT_EQ(r.cancels, 0);
  EXPECT_GE(r.threads.size(), 3u);
  EXPECT_TRUE(r.threads.contains(std::this_thread::get_id())) << "the first call of a batch is made here";
}

TEST_F(TxSqlite, AParallelTryThatFailsAbortsAndCancelsEveryBranch) {
  CoordinatorOptions o;
  o.parallel_branches = true;
  auto c = open(o);
  Rendezvous r;
  r.together = 2;
  c.add_participant("ok", r.participant());
  c.add_participant("no", r.participant(true));
  auto state = c.run("par-fail", {{"ok", ""}, {"no", ""}});
  ASSERT_EQ(state.code(), Errc::aborted) << state.status().to_string();
  EXPECT_NE(state.status().message().find("branch 1 Try failed"), std::string::npos) << state.status().to_string();
  EXPECT_EQ(r.cancels, 2) << "the Try that succeeded beside it is cancelled too";
  EXPECT_EQ(r.confirms, 0);
  auto info = c.show("par-fail");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, State::aborted);
}

// on_step's exceptions reach run()'s caller in order as in parallel, once
// the calls made beside the one that threw have returned; the transaction
// is left to recovery, which aborts it.
TEST_F(TxSqlite, AnOnStepThatThrowsOnAPoolThreadReachesTheCaller) {
  CoordinatorOptions o;
  o.parallel_branches = true;
  o.claim_lease = 200ms;
  o.on_step = [](std::string_view, std::string_view step) {
    if (step == "before try 2") throw std::runtime_error("tracing failed");
  };
  auto c = open(o);
  Rendezvous r;
  for (const char* p : {"a", "b", "c"}) c.add_participant(p, r.participant());
  EXPECT_THROW((void)c.run("ex", {{"a", ""}, {"b", ""}, {"c", ""}}), std::runtime_error);
  std::this_thread::sleep_for(300ms);  // its claim lapses
  auto n = c.recover();
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  auto info = c.show("ex");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, State::aborted);
  EXPECT_EQ(r.cancels, 3);
}

TEST_F(TxSqlite, ParallelCallsThatThrowAreUnknownAndAskedAgain) {
  CoordinatorOptions o;
  o.parallel_branches = true;
  o.retry_base = 1ms;
  o.retry_cap = 5ms;
  auto c = open(o);
  std::atomic<int> throws{2}, confirms{0};
  Participant flaky{[&](const BranchContext&) -> Outcome {
                      if (throws.fetch_sub(1) > 0) throw std::runtime_error("flaky");
                      return Outcome::success;
                    },
                    [&](const BranchContext&) -> Outcome {
                      if (throws.fetch_sub(1) > 0) throw std::runtime_error("flaky");
                      ++confirms;
                      return Outcome::success;
                    },
                    [](const BranchContext&) { return Outcome::success; }};
  c.add_participant("x", flaky);
  c.add_participant("y", flaky);
  throws = 3;
  auto state = c.run("throws", {{"x", ""}, {"y", ""}});
  ASSERT_TRUE(state.ok()) << state.status().to_string();
  EXPECT_EQ(confirms, 2);
  EXPECT_GE(c.stats().branch_failures, 3u);
}

TEST_F(TxSqlite, ManyConcurrentTransfersConserveMoney) {
  for (bool parallel : {false, true}) {
    SCOPED_TRACE(parallel ? "parallel branches" : "in order");
    test::TempDir fresh;  // new banks and log each round
    Bank a{fresh.file("alice.db"), 100}, b{fresh.file("bob.db"), 50};
    CoordinatorOptions o;
    o.retry_base = 1ms;
    o.parallel_branches = parallel;
    auto c = Coordinator::open("sqlite://" + fresh.file("tx.db"), o);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    c->add_participant("alice", a.debit());
    c->add_participant("bob", b.credit());
    Tally tally;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 10; ++i) tally.add(c->run("m" + std::to_string(t) + "-" + std::to_string(i), transfer(7)));
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(tally.committed + tally.aborted, 40);
    EXPECT_EQ(tally.committed, 14) << "alice's 100 covers 14 transfers of 7";
    EXPECT_EQ(a.column("balance"), 2);
    EXPECT_EQ(b.column("balance"), 50 + 98);
    EXPECT_EQ(a.column("frozen"), 0);
    EXPECT_EQ(b.column("incoming"), 0);
  }
}

}  // namespace
}  // namespace dlock::tx

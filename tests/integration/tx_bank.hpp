// tests/integration/tx_bank.hpp: a TCC participant for the transaction
// tests, keeping one account in its own SQLite database behind the barrier.
#ifndef DLOCK_TESTS_INTEGRATION_TX_BANK_HPP_
#define DLOCK_TESTS_INTEGRATION_TX_BANK_HPP_

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlock/tx.hpp"
#include "support/temp_dir.hpp"

namespace dlock::tx {

// A participant's database: one account, the money it holds, the money
// frozen by a Try (debits) and the money on its way in (credits).
class Bank {
 public:
  Bank(const std::string& path, std::int64_t balance) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) throw std::runtime_error("open " + path);
    sqlite3_busy_timeout(db_, 5000);
    exec(
        "CREATE TABLE IF NOT EXISTS acct (balance INTEGER NOT NULL, frozen INTEGER NOT NULL, incoming INTEGER NOT "
        "NULL)");
    exec("INSERT INTO acct SELECT " + std::to_string(balance) + ", 0, 0 WHERE NOT EXISTS (SELECT 1 FROM acct)");
  }
  ~Bank() { sqlite3_close(db_); }

  std::int64_t column(const char* name) {
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db_, (std::string("SELECT ") + name + " FROM acct").c_str(), -1, &st, nullptr);
    sqlite3_step(st);
    const auto v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
  }

  // Debit `amount` (the payload): Try freezes it, Confirm spends it, Cancel
  // gives it back.
  Participant debit() {
    return {[this](const BranchContext& c) {
              return guarded(c, "UPDATE acct SET balance = balance - ?1, frozen = frozen + ?1 WHERE balance >= ?1");
            },
            [this](const BranchContext& c) { return guarded(c, "UPDATE acct SET frozen = frozen - ?1"); },
            [this](const BranchContext& c) {
              return guarded(c, "UPDATE acct SET balance = balance + ?1, frozen = frozen - ?1");
            }};
  }
  // Credit `amount`: Try announces it, Confirm books it, Cancel drops it.
  Participant credit() {
    return {[this](const BranchContext& c) { return guarded(c, "UPDATE acct SET incoming = incoming + ?1"); },
            [this](const BranchContext& c) {
              return guarded(c, "UPDATE acct SET balance = balance + ?1, incoming = incoming - ?1");
            },
            [this](const BranchContext& c) { return guarded(c, "UPDATE acct SET incoming = incoming - ?1"); }};
  }

  // The barrier's rows of `gid`, sorted and joined: "cancel,try".
  std::string barrier_ops(const std::string& gid) {
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db_, "SELECT group_concat(op) FROM (SELECT op FROM dlock_tx_barrier WHERE gid = ?1 ORDER BY op)",
                       -1, &st, nullptr);
    sqlite3_bind_text(st, 1, gid.c_str(), -1, SQLITE_TRANSIENT);
    std::string out;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr)
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return out;
  }

  std::atomic<int> calls{0};        // business statements that ran (barrier let them through)
  std::atomic<bool> refuse{false};  // every call answers unknown, touching nothing

 private:
  void exec(const std::string& sql) {
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK)
      throw std::runtime_error(sqlite3_errmsg(db_));
  }
  Outcome guarded(const BranchContext& c, const char* sql) {
    if (refuse) return Outcome::unknown;
    return sqlite_barrier(db_, c, [&](sqlite3* db) {
      sqlite3_stmt* st = nullptr;
      if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) return Outcome::unknown;
      sqlite3_bind_int64(st, 1, std::stoll(c.payload));
      const int rc = sqlite3_step(st);
      sqlite3_finalize(st);
      if (rc != SQLITE_DONE) return Outcome::unknown;
      ++calls;
      return sqlite3_changes(db) == 1 ? Outcome::success : Outcome::failure;  // no row: not enough money
    });
  }
  sqlite3* db_ = nullptr;
};

// Alice (100, debited) and Bob (50, credited), each in a SQLite file of
// the test's own directory, and the checks every transfer test makes.
class TwoBanksTest : public ::testing::Test {
 protected:
  std::int64_t money() {
    return alice.column("balance") + alice.column("frozen") + bob.column("balance") + bob.column("incoming");
  }
  void expect_settled() {
    EXPECT_EQ(money(), 150) << "money is conserved";
    EXPECT_EQ(alice.column("frozen"), 0);
    EXPECT_EQ(bob.column("incoming"), 0);
  }
  static std::vector<Branch> transfer(int amount) {
    return {{"alice", std::to_string(amount)}, {"bob", std::to_string(amount)}};
  }

  test::TempDir dir;
  Bank alice{dir.file("alice.db"), 100};
  Bank bob{dir.file("bob.db"), 50};
};

// Counts the answers of runs on many threads: commit or abort decided;
// anything else fails the test.
struct Tally {
  std::atomic<int> committed{0}, aborted{0};
  void add(const Result<State>& r) {
    if (r.ok())
      ++committed;
    else if (r.code() == Errc::aborted)
      ++aborted;
    else
      ADD_FAILURE() << r.status().to_string();
  }
};

// Recovers `gid` with `c` until it is finished or `limit` has passed (a
// dead coordinator's claim lapses first); returns the log's record then.
inline Result<TxInfo> recover_until_finished(Coordinator& c, const std::string& gid,
                                             std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  auto info = c.show(gid);
  for (auto until = std::chrono::steady_clock::now() + limit;
       info.ok() && !finished(info->state) && std::chrono::steady_clock::now() < until; info = c.show(gid)) {
    (void)c.retry_now(gid);
    auto n = c.recover();
    if (!n.ok()) return n.status();
    if (*n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return info;
}

// Opens the log at `url` with create_if_missing false, where transaction
// "e1" committed, and checks it is read and used as any log: "e2" (a
// transfer of 10 from alice to bob) commits.
inline void expect_existing_log_used(const std::string& url, Bank& alice, Bank& bob) {
  CoordinatorOptions only_existing;
  only_existing.create_if_missing = false;
  auto existing = Coordinator::open(url, only_existing);
  ASSERT_TRUE(existing.ok()) << existing.status().to_string();
  auto info = existing->show("e1");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->state, State::committed);
  existing->add_participant("alice", alice.debit());
  existing->add_participant("bob", bob.credit());
  EXPECT_TRUE(existing->run("e2", {{"alice", "10"}, {"bob", "10"}}).ok())
      << "a log that exists is used as with create_if_missing";
}

}  // namespace dlock::tx

#endif  // DLOCK_TESTS_INTEGRATION_TX_BANK_HPP_

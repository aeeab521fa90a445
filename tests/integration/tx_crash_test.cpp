// A coordinator process killed at every step boundary of a TCC transaction
// (after each log write, before and after each participant call); another
// coordinator then recovers it. Whatever the point, the transaction ends,
// in the only direction the log allows, and the money adds up.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/tx.hpp"
#include "integration/tx_bank.hpp"
#include "support/temp_dir.hpp"

namespace dlock::tx {
namespace {

using namespace std::chrono_literals;

struct Scenario {
  const char* name;
  int amount;       // alice (100) pays bob (50) this much
  bool can_commit;  // whether every Try succeeds
};

class TxCrash : public ::testing::TestWithParam<Scenario> {
 protected:
  // Three branches: alice pays, bob and carol are each credited.
  static std::vector<Branch> branches(int amount) {
    return {{"alice", std::to_string(2 * amount)}, {"bob", std::to_string(amount)}, {"carol", std::to_string(amount)}};
  }
  void crash_at_every_step(const Scenario& s, bool parallel);
  static void add(Coordinator& c, Bank& alice, Bank& bob, Bank& carol) {
    c.add_participant("alice", alice.debit());
    c.add_participant("bob", bob.credit());
    c.add_participant("carol", carol.credit());
  }

  // The steps of a whole run, in order, taken in a scratch directory.
  static std::vector<std::string> steps_of_a_whole_run(const Scenario& s, bool parallel) {
    test::TempDir dir;
    Bank alice(dir.file("alice.db"), 100), bob(dir.file("bob.db"), 50), carol(dir.file("carol.db"), 0);
    CoordinatorOptions o;
    o.parallel_branches = parallel;
    std::mutex mu;  // with parallel_branches, steps come from several threads
    std::vector<std::string> steps;
    o.on_step = [&](std::string_view, std::string_view step) {
      std::lock_guard lk(mu);
      steps.emplace_back(step);
    };
    auto c = Coordinator::open("sqlite://" + dir.file("tx.db"), o);
    if (!c.ok()) throw Error(c.status());
    add(*c, alice, bob, carol);
    (void)c->run("g", branches(s.amount));
    return steps;
  }
};

// With parallel_branches the calls of a phase run at once, so "the k-th
// step" falls between other calls each time: every k still leaves a log
// that recovery must end the only way it allows.
TEST_P(TxCrash, AtEveryStepBoundaryRecoveryEndsItTheOnlyWayTheLogAllows) {
  for (bool parallel : {false, true}) {
    SCOPED_TRACE(parallel ? "parallel branches" : "in order");
    crash_at_every_step(GetParam(), parallel);
  }
}

void TxCrash::crash_at_every_step(const Scenario& s, bool parallel) {
  const auto steps = steps_of_a_whole_run(s, parallel);
  ASSERT_GE(steps.size(), 8u);
  ASSERT_EQ(steps.front(), "created");
  ASSERT_EQ(steps.back(), s.can_commit ? "committed" : "aborted");
  std::string all;
  for (const auto& step : steps) all += (all.empty() ? "" : ", ") + step;
  std::cout << "[steps] " << s.name << ": " << all << std::endl;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    SCOPED_TRACE("killed after step " + std::to_string(k) + ": " + steps[k]);
    test::TempDir dir;
    const std::string url = "sqlite://" + dir.file("tx.db");
    { Bank(dir.file("alice.db"), 100), Bank(dir.file("bob.db"), 50), Bank(dir.file("carol.db"), 0); }
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      Bank alice(dir.file("alice.db"), 100), bob(dir.file("bob.db"), 50), carol(dir.file("carol.db"), 0);
      CoordinatorOptions o;
      o.claim_lease = 200ms;
      o.parallel_branches = parallel;
      std::atomic<std::size_t> seen{0};
      o.on_step = [&](std::string_view, std::string_view) {
        if (seen++ == k) ::_exit(0);
      };
      auto c = Coordinator::open(url, o);
      if (!c.ok()) ::_exit(2);
      add(*c, alice, bob, carol);
      (void)c->run("g", branches(s.amount));
      ::_exit(3);  // ran to the end: the step was never reached
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;

    Bank alice(dir.file("alice.db"), 100), bob(dir.file("bob.db"), 50), carol(dir.file("carol.db"), 0);
    auto c = Coordinator::open(url);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    add(*c, alice, bob, carol);
    auto info = c->show("g");
    ASSERT_TRUE(info.ok()) << info.status().to_string();
    const bool decided_commit = info->state == State::committing || info->state == State::committed;
    info = recover_until_finished(*c, "g");
    ASSERT_TRUE(info.ok()) << info.status().to_string();
    ASSERT_TRUE(finished(info->state)) << to_string(info->state);
    // Decided before the crash: that way. Undecided: presumed abort.
    const bool committed = info->state == State::committed;
    EXPECT_EQ(committed, decided_commit) << "the decision in the log is the outcome";
    if (!s.can_commit) {
      EXPECT_FALSE(committed);
    }
    const std::int64_t paid = committed ? 2 * s.amount : 0;
    EXPECT_EQ(alice.column("balance"), 100 - paid);
    EXPECT_EQ(bob.column("balance"), 50 + paid / 2);
    EXPECT_EQ(carol.column("balance"), paid / 2);
    EXPECT_EQ(alice.column("frozen") + bob.column("incoming") + carol.column("incoming"), 0) << "nothing in flight";
  }
}

// What the seed warns about: a coordinator that keeps its decision only in
// memory. Killed between two Confirms, it leaves alice's money spent and
// carol's never booked, and nothing anywhere knows that the transaction
// was meant to commit: there is nothing to recover from.
TEST(TxNaive, ACoordinatorWithoutADurableDecisionLosesMoneyWhenItDies) {
  test::TempDir dir;
  { Bank(dir.file("alice.db"), 100), Bank(dir.file("bob.db"), 50), Bank(dir.file("carol.db"), 0); }
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Bank alice(dir.file("alice.db"), 100), bob(dir.file("bob.db"), 50), carol(dir.file("carol.db"), 0);
    const Participant ps[] = {alice.debit(), bob.credit(), carol.credit()};
    const char* amounts[] = {"40", "20", "20"};
    for (int b = 0; b < 3; ++b)
      if (ps[b].try_({"g", b, Op::try_, amounts[b]}) != Outcome::success) ::_exit(2);
    for (int b = 0; b < 3; ++b) {
      if (b == 2) ::_exit(0);  // dies before carol's Confirm
      (void)ps[b].confirm({"g", b, Op::confirm, amounts[b]});
    }
    ::_exit(3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  Bank alice(dir.file("alice.db"), 100), bob(dir.file("bob.db"), 50), carol(dir.file("carol.db"), 0);
  const auto spendable = alice.column("balance") + bob.column("balance") + carol.column("balance");
  EXPECT_EQ(spendable, 130) << "20 of the 150 is stuck in carol's incoming, with no log to finish it";
  EXPECT_EQ(carol.column("incoming"), 20);
}

INSTANTIATE_TEST_SUITE_P(Tcc, TxCrash, ::testing::Values(Scenario{"commits", 20, true}, Scenario{"aborts", 80, false}),
                         [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace dlock::tx

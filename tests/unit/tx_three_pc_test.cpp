// Three-phase commit, the experiment: its machines run in a simulated
// network (virtual clock, 1 ms per hop) where the coordinator may crash
// after any message it sends and the network may split after any of them.
// Crashes alone never make participants disagree; a partition after
// PreCommit does, which is the case the seed does not mention.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tx/three_pc.hpp"

namespace dlock::tx::detail::three_pc {
namespace {

using namespace std::chrono_literals;

class Sim {
 public:
  Sim(int n, const std::vector<bool>& votes, milliseconds timeout = 100ms) : coord_(n, timeout) {
    parts_.emplace_back(0, n, timeout, true);  // index 0 unused: node 0 is the coordinator
    for (int p = 1; p <= n; ++p) parts_.emplace_back(p, n, timeout, votes[static_cast<std::size_t>(p - 1)]);
  }

  int crash_coordinator_after = -1;  // its sends; -1: never
  int split_after = -1;              // the coordinator's sends after which the network splits
  std::set<int> side_a;              // the nodes on one side of the split (the rest on the other)

  void run(milliseconds limit = 2000ms) {
    send(0, coord_.start(now_));
    for (const auto end = now_ + limit; now_ < end; now_ += 1ms) {
      std::vector<Flight> due;
      for (auto it = net_.begin(); it != net_.end();)
        if (it->at <= now_) {
          due.push_back(*it);
          it = net_.erase(it);
        } else {
          ++it;
        }
      for (const Flight& f : due) {
        if (!connected(f.from, f.to)) continue;  // lost in the split
        if (f.to == 0) {
          if (!crashed_) send(0, coord_.on_message(f.from, f.msg, now_));
        } else {
          send(f.to, parts_[static_cast<std::size_t>(f.to)].on_message(f.from, f.msg, f.state, now_));
        }
      }
      if (!crashed_) send(0, coord_.on_tick(now_));
      for (int p = 1; p < static_cast<int>(parts_.size()); ++p)
        send(p, parts_[static_cast<std::size_t>(p)].on_tick(now_));
    }
  }

  std::vector<State> states() const {
    std::vector<State> out;
    for (std::size_t p = 1; p < parts_.size(); ++p) out.push_back(parts_[p].state());
    return out;
  }
  bool all_decided() const {
    for (std::size_t p = 1; p < parts_.size(); ++p)
      if (!parts_[p].decided()) return false;
    return true;
  }
  // No participant left holding its vote (one never asked has nothing to
  // decide: the transaction cannot have committed without it).
  bool none_in_doubt() const {
    for (State s : states())
      if (s == State::uncertain || s == State::prepared) return false;
    return true;
  }
  bool agree() const {
    auto s = states();
    for (State x : s)
      if (x != s.front()) return false;
    return true;
  }
  std::string describe() const {
    std::string out;
    for (State s : states()) out += std::string(out.empty() ? "" : " ") + to_string(s);
    return out;
  }

 private:
  struct Flight {
    Clock::time_point at;
    int from, to;
    Msg msg;
    State state;
  };
  bool connected(int a, int b) const { return !split_ || side_a.count(a) == side_a.count(b); }
  void send(int from, const std::vector<Send>& out) {
    for (const Send& s : out) {
      if (from == 0 && crashed_) return;
      if (connected(from, s.to)) net_.push_back({now_ + 1ms, from, s.to, s.msg, s.state});
      if (from == 0) {
        ++coordinator_sends_;
        if (coordinator_sends_ == crash_coordinator_after) crashed_ = true;
        if (coordinator_sends_ == split_after) split_ = true;
      }
    }
  }

  Coordinator coord_;
  std::vector<Participant> parts_;
  std::vector<Flight> net_;
  Clock::time_point now_{};
  int coordinator_sends_ = 0;
  bool crashed_ = false, split_ = false;
};

TEST(ThreePc, WithoutFaultsEveryoneCommits) {
  Sim sim(3, {true, true, true});
  sim.run();
  EXPECT_EQ(sim.states(), std::vector<State>(3, State::committed));
}

TEST(ThreePc, ANoVoteAbortsEveryone) {
  Sim sim(3, {true, false, true});
  sim.run();
  EXPECT_EQ(sim.states(), std::vector<State>(3, State::aborted));
}

// The coordinator dies after each of its messages in turn: the
// participants' timers and termination protocol always reach one decision
// (commit once any of them was prepared, abort otherwise).
TEST(ThreePc, ACoordinatorCrashAtAnyPointLeavesTheParticipantsAgreeing) {
  for (int n : {2, 3}) {
    for (int k = 1; k <= 3 * n; ++k) {
      Sim sim(n, std::vector<bool>(static_cast<std::size_t>(n), true));
      sim.crash_coordinator_after = k;
      sim.run();
      EXPECT_TRUE(sim.all_decided()) << n << " participants, crash after send " << k << ": " << sim.describe();
      EXPECT_TRUE(sim.agree()) << n << " participants, crash after send " << k << ": " << sim.describe();
      if (k > 2 * n) {
        EXPECT_EQ(sim.states().front(), State::committed) << "PreCommit reached someone";
      }
    }
  }
}

// The network splits right after PreCommit reached participant 1 and not
// participant 2. The coordinator's side commits (every vote was yes; a
// missing ack does not stop it), while participant 2, alone and uncertain,
// hears of no prepared peer and aborts: 3PC's assumption (no partitions,
// bounded delays) is broken, and so is atomicity.
TEST(ThreePc, APartitionAfterPreCommitMakesTheTwoSidesDecideDifferently) {
  Sim sim(2, {true, true});
  sim.split_after = 3;  // CanCommit to 1 and 2, then PreCommit to 1
  sim.side_a = {0, 1};
  sim.run();
  EXPECT_EQ(sim.states(), (std::vector<State>{State::committed, State::aborted})) << sim.describe();
}

// Every split after every message of the coordinator, six groupings of
// three participants: every participant that voted still decides (its
// timer), and some splits end with both decisions (crashes alone never
// do: the test above).
TEST(ThreePc, SomeSplitsBreakAgreementAndNoneLeavesAVoterInDoubt) {
  int splits = 0, disagreements = 0;
  for (int k = 1; k <= 9; ++k) {
    for (const std::set<int>& side : std::vector<std::set<int>>{{0}, {0, 1}, {0, 2}, {0, 1, 2}, {0, 3}, {1}}) {
      Sim sim(3, {true, true, true});
      sim.split_after = k;
      sim.side_a = side;
      sim.run();
      ++splits;
      EXPECT_TRUE(sim.none_in_doubt()) << "timers decide every participant that voted: " << sim.describe();
      std::set<State> decided;
      for (State s : sim.states())
        if (s == State::committed || s == State::aborted) decided.insert(s);
      disagreements += decided.size() > 1;
    }
  }
  EXPECT_GT(disagreements, 0) << "of " << splits << " splits";
  RecordProperty("disagreements", disagreements);
  RecordProperty("splits", splits);
}

}  // namespace
}  // namespace dlock::tx::detail::three_pc

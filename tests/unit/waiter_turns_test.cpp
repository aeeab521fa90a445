// The rules of a turn addressed to one waiter (waiter_turns.hpp), on a
// real io_context and no server.
#include "waiter_turns.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <vector>

namespace dlock::detail {
namespace {

using namespace std::chrono_literals;

struct Recorder {
  boost::asio::io_context io;
  std::vector<std::pair<std::string, std::uint64_t>> woke, left;
  WaiterTurns turns{io, [this](const std::string& n, std::uint64_t a) { woke.emplace_back(n, a); },
                    [this](const std::string& n, std::uint64_t a) { left.emplace_back(n, a); }};
  void run_for(std::chrono::milliseconds d) {
    io.restart();
    io.run_for(d);
  }
};

TEST(WaiterTurns, ATurnWakesTheWaiterItIsFor) {
  Recorder r;
  r.turns.add("job", 7);
  r.turns.woken("job", 7);
  ASSERT_EQ(r.woke.size(), 1u);
  EXPECT_EQ(r.woke[0], std::make_pair(std::string("job"), std::uint64_t{7}));
  EXPECT_TRUE(r.left.empty());
}

TEST(WaiterTurns, ATurnForAnAttemptThatNoLongerWaitsIsPassedOn) {
  Recorder r;
  r.turns.add("job", 7);
  r.turns.remove("job", 7);
  r.turns.woken("job", 7);
  r.turns.woken("other", 7);  // never waited here: passed on too
  EXPECT_TRUE(r.woke.empty());
  EXPECT_EQ(r.left.size(), 2u);
}

TEST(WaiterTurns, AStandByWakesAfterItsTimeUnlessTheWaiterStopped) {
  Recorder r;
  r.turns.add("job", 1);
  r.turns.add("job", 2);
  r.turns.stand_by("job", 1, 20);
  r.turns.stand_by("job", 2, 20);
  r.turns.remove("job", 2);  // granted, or gave up, before its stand-by ended
  r.run_for(5ms);
  EXPECT_TRUE(r.woke.empty()) << "not before its time";
  r.run_for(100ms);
  ASSERT_EQ(r.woke.size(), 1u);
  EXPECT_EQ(r.woke[0].second, 1u);
  r.turns.stand_by("job", 9, 1);  // not waiting: nothing
  r.run_for(20ms);
  EXPECT_EQ(r.woke.size(), 1u);
}

TEST(WaiterTurns, NothingRunsAfterClose) {
  Recorder r;
  r.turns.add("job", 1);
  r.turns.stand_by("job", 1, 1);
  r.turns.close();
  r.turns.woken("job", 1);
  r.run_for(20ms);
  EXPECT_TRUE(r.woke.empty());
  EXPECT_TRUE(r.left.empty());
}

TEST(WaiterTurns, TheWireFormRoundTripsAndBadLinesAreRefused) {
  WaiterTurns::Message m;
  ASSERT_TRUE(WaiterTurns::parse(WaiterTurns::turn_message(42, "a:b"), m));
  EXPECT_TRUE(m.turn);
  EXPECT_EQ(m.attempt, 42u);
  EXPECT_EQ(m.name, "a:b");
  ASSERT_TRUE(WaiterTurns::parse(WaiterTurns::stand_by_message(3, 500, "n"), m));
  EXPECT_FALSE(m.turn);
  EXPECT_EQ(m.attempt, 3u);
  EXPECT_EQ(m.ms, 500);
  EXPECT_EQ(m.name, "n");
  for (const char* bad :
       {"", "w", "w1", "w1:", "x1:n", "wx:n", "s1:n", "s1:x:n", "s1:5:", "w99999999999999999999999:n"})
    EXPECT_FALSE(WaiterTurns::parse(bad, m)) << bad;
}

}  // namespace
}  // namespace dlock::detail

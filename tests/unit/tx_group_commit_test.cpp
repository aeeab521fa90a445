// Group commit of the log's writes, with fake writers: no database.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tx/group_commit.hpp"

namespace dlock::tx::detail {
namespace {

using namespace std::chrono_literals;
using postgres::Rows;
using Write = GroupCommit::Write;

const std::string kSql = "a write";

Rows rows_of(const Write& w) { return {{w.params.at(0)}}; }

// Polls `done` for up to 10 s.
template <class F>
bool eventually(F done) {
  for (int i = 0; i < 10000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

TEST(GroupCommit, WritesArrivingWhileABatchIsInFlightGoOutTogetherInOrder) {
  std::atomic<bool> first_in{false}, all_queued{false};
  std::mutex mu;
  std::vector<std::vector<std::string>> batches;
  GroupCommit g(
      1, 64,
      [&](const std::vector<const Write*>& ws, GroupCommit::Clock::time_point) -> Result<std::vector<Rows>> {
        std::vector<Rows> out;
        std::vector<std::string> names;
        for (const auto* w : ws) {
          out.push_back(rows_of(*w));
          names.push_back(w->params[0]);
        }
        std::lock_guard lk(mu);
        batches.push_back(names);
        return out;
      },
      [&](const Write& w) -> Result<Rows> {
        // The first write alone holds its slot until five more wait.
        if (w.params[0] == "w0") {
          first_in = true;
          EXPECT_TRUE(eventually([&] { return all_queued.load(); }));
        }
        std::lock_guard lk(mu);
        batches.push_back({w.params[0]});
        return rows_of(w);
      });
  std::vector<std::thread> threads;
  std::vector<std::string> answers(6);
  threads.emplace_back([&] { answers[0] = *g.write({&kSql, {"w0"}})->at(0).at(0); });
  ASSERT_TRUE(eventually([&] { return first_in.load(); }));
  for (int i = 1; i < 6; ++i) {
    // One at a time, so that the batch's order is known.
    const std::size_t before = g.waiting();
    threads.emplace_back([&, i] {
      auto r = g.write({&kSql, {"w" + std::to_string(i)}});
      answers[static_cast<std::size_t>(i)] = r.ok() ? *r->at(0).at(0) : r.status().to_string();
    });
    EXPECT_TRUE(eventually([&] { return g.waiting() == before + 1; }));
  }
  all_queued = true;
  for (auto& t : threads) t.join();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(answers[static_cast<std::size_t>(i)], "w" + std::to_string(i));
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0], std::vector<std::string>{"w0"});
  EXPECT_EQ(batches[1], (std::vector<std::string>{"w1", "w2", "w3", "w4", "w5"}));
  EXPECT_EQ(g.batches(), 2u);
  EXPECT_EQ(g.batched_writes(), 6u);
}

// Three writes ("w0", "bad", "w2") queued behind a first one that holds
// its slot until they all wait, so that they go out as one batch, which
// answers `batch_answer`. Their answers; `alone` counts the writes made
// again one by one, where "bad" is refused.
std::vector<Result<Rows>> three_behind_one(const Status& batch_answer, std::atomic<int>& alone) {
  std::atomic<bool> first_waits{false};
  GroupCommit* self = nullptr;
  GroupCommit g(
      1, 64,
      [&](const std::vector<const Write*>&, GroupCommit::Clock::time_point) -> Result<std::vector<Rows>> {
        return batch_answer;
      },
      [&](const Write& w) -> Result<Rows> {
        if (w.params[0] == "first") {
          first_waits = true;
          EXPECT_TRUE(eventually([&] { return self->waiting() == 3; }));
          return rows_of(w);
        }
        ++alone;
        if (w.params[0] == "bad") return Status(Errc::invalid_argument, "bad bytes");
        return rows_of(w);
      });
  self = &g;
  std::vector<Result<Rows>> out(3, Status(Errc::unavailable, "not run"));
  std::thread first([&] { (void)g.write({&kSql, {"first"}}); });
  EXPECT_TRUE(eventually([&] { return first_waits.load(); }));
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      out[static_cast<std::size_t>(i)] = g.write({&kSql, {i == 1 ? "bad" : "w" + std::to_string(i)}});
    });
  for (auto& t : threads) t.join();
  first.join();
  return out;
}

TEST(GroupCommit, ARefusedBatchIsWrittenAgainOneByOneSoOnlyTheBadWriteFails) {
  std::atomic<int> alone{0};
  auto out = three_behind_one(Status(Errc::aborted, "one of them was refused"), alone);
  EXPECT_EQ(alone, 3);
  ASSERT_TRUE(out[0].ok()) << out[0].status().to_string();
  EXPECT_EQ(out[1].code(), Errc::invalid_argument);
  ASSERT_TRUE(out[2].ok()) << out[2].status().to_string();
  EXPECT_EQ(*out[2]->at(0).at(0), "w2");
}

TEST(GroupCommit, ABatchWithoutAnAnswerIsUnknownForEveryWriteInIt) {
  std::atomic<int> alone{0};
  auto out = three_behind_one(Status(Errc::outcome_unknown, "no reply"), alone);
  EXPECT_EQ(alone, 0) << "an unknown outcome is never written again as if nothing happened";
  for (const auto& r : out) EXPECT_EQ(r.code(), Errc::outcome_unknown);
}

TEST(GroupCommit, AWriteStillWaitingAtItsDeadlineIsNotSent) {
  std::atomic<bool> first_waits{false}, late_answered{false};
  std::vector<std::string> sent;
  std::mutex mu;
  GroupCommit g(
      1, 64,
      [&](const std::vector<const Write*>& ws, GroupCommit::Clock::time_point) -> Result<std::vector<Rows>> {
        std::vector<Rows> out;
        std::lock_guard lk(mu);
        for (const auto* w : ws) {
          sent.push_back(w->params[0]);
          out.push_back(rows_of(*w));
        }
        return out;
      },
      [&](const Write& w) -> Result<Rows> {
        if (w.params[0] == "first") {
          first_waits = true;
          EXPECT_TRUE(eventually([&] { return late_answered.load(); }));
        }
        std::lock_guard lk(mu);
        sent.push_back(w.params[0]);
        return rows_of(w);
      });
  std::thread first([&] { (void)g.write({&kSql, {"first"}}); });
  ASSERT_TRUE(eventually([&] { return first_waits.load(); }));
  const auto t0 = GroupCommit::Clock::now();
  auto late = g.write({&kSql, {"late"}, t0 + 50ms});
  late_answered = true;
  first.join();
  EXPECT_EQ(late.code(), Errc::timeout) << late.status().to_string();
  EXPECT_GE(GroupCommit::Clock::now() - t0, 50ms);
  auto after = g.write({&kSql, {"after"}});
  EXPECT_TRUE(after.ok());
  EXPECT_EQ(sent, (std::vector<std::string>{"first", "after"})) << "the late write never went out";
  EXPECT_EQ(g.waiting(), 0u);
}

}  // namespace
}  // namespace dlock::tx::detail

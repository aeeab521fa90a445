// The dlock tool's recipes, run as a user would: `dlock elect`, and
// `dlock run --fair/--shared/--permits`, over a SQLite file (no server).
#include <signal.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "integration/common.hpp"
#include "support/temp_dir.hpp"

namespace dlock::test {
namespace {

const std::string kCli = DLOCK_CLI_PATH;

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

bool exists(const std::string& file) { return std::ifstream(file).good(); }

std::uint64_t read_number(const std::string& file) {
  std::ifstream in(file);
  std::uint64_t n = 0;
  return in >> n ? n : 0;
}

class CliRecipes : public ::testing::Test {
 protected:
  TempDir dir;
  const std::string url = "sqlite://" + dir.path() + "/locks.db";
  Env env() const { return {{"DLOCK_URL", url}}; }
  std::string file(const std::string& name) const { return dir.file(name); }

  RunResult dlock(std::vector<std::string> args) {
    args.insert(args.begin(), kCli);
    return run(args, 30s, env());
  }
  // dlock in the background, its output in a file of its own.
  Child start(std::vector<std::string> args, const std::string& out) {
    args.insert(args.begin(), kCli);
    return spawn(args, env(), file(out));
  }
  // A shell command that writes `started` (with what `what` expands to) and
  // then runs until `go` exists.
  std::string hold_until(const std::string& started, const std::string& go, const std::string& what = "x") const {
    return "echo \"" + what + "\" > " + file(started) + "; until [ -e " + file(go) + " ]; do sleep 0.02; done";
  }
  nlohmann::json status_json(const std::string& name) {
    auto r = dlock({"status", "--json", name});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
  }
};

TEST_F(CliRecipes, ElectRunsTheCommandWithItsTerm) {
  auto r = dlock({"elect", "-v", "--id", "alpha", "sched", "--", "sh", "-c",
                  "echo \"$DLOCK_NAME $DLOCK_ID $DLOCK_TERM $DLOCK_FENCE\"; exit 3"});
  EXPECT_EQ(r.exit_code, 3) << "CMD's status: " << r.err;
  std::istringstream words(r.out);
  std::string name, id;
  std::uint64_t term = 0, fence = 0;
  words >> name >> id >> term >> fence;
  EXPECT_EQ(name, "sched") << r.out;
  EXPECT_EQ(id, "alpha") << r.out;
  EXPECT_GT(term, 0u) << r.out;
  EXPECT_EQ(fence, term) << "DLOCK_FENCE is the term: " << r.out;
  EXPECT_TRUE(has(r.err, "leading 'sched' as 'alpha' (term " + std::to_string(term) + ")")) << r.err;
  EXPECT_TRUE(has(r.err, "resigned 'sched'")) << r.err;
  EXPECT_EQ(status_json("sched")["held"], false) << "resigned when CMD ended";
  // The default id: host:pid.
  auto anon = dlock({"elect", "sched", "--", "sh", "-c", "echo $DLOCK_ID"});
  EXPECT_EQ(anon.exit_code, 0) << anon.err;
  EXPECT_TRUE(has(anon.out, ":")) << anon.out;
}

// The leader's id is what status shows; a second candidate waits in line and
// leads once the first's CMD ends, with a larger term.
TEST_F(CliRecipes, ASecondCandidateTakesOverWhenTheFirstEndsWithALargerTerm) {
  auto first = start(
      {"elect", "--id", "cand-a", "sched", "--", "sh", "-c", hold_until("term-a", "go-a", "$DLOCK_TERM")}, "out-a");
  ASSERT_TRUE(eventually([&] { return read_number(file("term-a")) > 0; }, 10s));
  const std::uint64_t term_a = read_number(file("term-a"));

  auto text = dlock({"status", "sched"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(has(text.out, "sched: held")) << text.out;
  EXPECT_TRUE(has(text.out, "sched: held by cand-a for ")) << "the leader's id: " << text.out;
  auto j = status_json("sched");
  EXPECT_EQ(j["holder"], "cand-a");
  EXPECT_EQ(j["fence"], term_a);

  auto second =
      start({"elect", "--id", "cand-b", "sched", "--", "sh", "-c", "echo $DLOCK_TERM > " + file("term-b")}, "out-b");
  EXPECT_EQ(wait_exit(second.pid, 700ms), -1) << "the second candidate did not wait";
  EXPECT_FALSE(exists(file("term-b"))) << "two leaders at once";
  EXPECT_EQ(status_json("sched")["holder"], "cand-a") << "still the first leads";

  std::ofstream(file("go-a")).flush();
  EXPECT_EQ(wait_exit(first.pid, 10s), 0);
  EXPECT_EQ(wait_exit(second.pid, 10s), 0) << "the second did not take over";
  const std::uint64_t term_b = read_number(file("term-b"));
  EXPECT_GT(term_b, term_a);
  EXPECT_EQ(status_json("sched")["held"], false);
}

// A candidate stopped while it waits leaves the line at once: the next one
// leads as soon as the leader resigns.
TEST_F(CliRecipes, ASignalWhileCampaigningLeavesTheLine) {
  auto leader = start({"elect", "--id", "a", "line", "--", "sh", "-c", hold_until("a", "go")}, "out-a");
  ASSERT_TRUE(eventually([&] { return exists(file("a")); }, 10s));
  auto quitter = start({"elect", "--id", "b", "line", "--", "touch", file("b")}, "out-b");
  std::this_thread::sleep_for(500ms);  // in line behind a
  auto next = start({"elect", "--id", "c", "line", "--", "touch", file("c")}, "out-c");
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(::kill(quitter.pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit(quitter.pid, 5s), 128 + SIGTERM);
  std::ofstream(file("go")).flush();
  EXPECT_EQ(wait_exit(leader.pid, 10s), 0);
  auto t0 = Clock::now();
  EXPECT_EQ(wait_exit(next.pid, 10s), 0);
  EXPECT_LT(ms_since(t0), 5000) << "the line waited for the departed candidate's lease";
  EXPECT_FALSE(exists(file("b"))) << "CMD ran after the signal";
  EXPECT_TRUE(exists(file("c")));
}

TEST_F(CliRecipes, TwoPermitsLetTwoRunAtOnceAndHoldAThirdBack) {
  std::vector<Child> runs;
  for (int i = 0; i < 3; ++i)
    runs.push_back(start({"run", "--permits", "2", "slots", "--", "sh", "-c",
                          hold_until("started-" + std::to_string(i), "go", "$DLOCK_FENCE")},
                         "out-" + std::to_string(i)));
  auto started = [&] {
    int n = 0;
    for (int i = 0; i < 3; ++i) n += exists(file("started-" + std::to_string(i))) ? 1 : 0;
    return n;
  };
  ASSERT_TRUE(eventually([&] { return started() == 2; }, 10s));
  std::this_thread::sleep_for(700ms);
  EXPECT_EQ(started(), 2) << "a third ran with two permits";
  auto j = status_json("slots");
  EXPECT_EQ(j["held"], true);
  EXPECT_EQ(j["holders"], 2);
  EXPECT_EQ(j["shared"], true);
  // Every run of a name must agree on its permits.
  auto other = dlock({"run", "--permits", "3", "--wait", "0", "slots", "--", "touch", file("disagreed")});
  EXPECT_EQ(other.exit_code, 64) << other.err;
  EXPECT_FALSE(exists(file("disagreed")));

  std::ofstream(file("go")).flush();
  for (auto& r : runs) EXPECT_EQ(wait_exit(r.pid, 10s), 0);
  EXPECT_EQ(started(), 3) << "the third ran once a permit came back";
  EXPECT_EQ(status_json("slots")["held"], false);
}

TEST_F(CliRecipes, SharedRunsOverlapWhileAnExclusiveRunWaits) {
  auto r1 = start({"run", "--shared", "catalog", "--", "sh", "-c", hold_until("r1", "go")}, "out-r1");
  auto r2 = start({"run", "--shared", "catalog", "--", "sh", "-c", hold_until("r2", "go")}, "out-r2");
  ASSERT_TRUE(eventually([&] { return exists(file("r1")) && exists(file("r2")); }, 10s)) << "readers did not overlap";
  auto j = status_json("catalog");
  EXPECT_EQ(j["shared"], true);
  EXPECT_EQ(j["holders"], 2);
  auto text = dlock({"status", "catalog"});
  EXPECT_TRUE(has(text.out, "held shared by 2")) << text.out;

  auto writer = start({"run", "catalog", "--", "touch", file("wrote")}, "out-w");
  EXPECT_EQ(wait_exit(writer.pid, 700ms), -1) << "the writer did not wait for the readers";
  EXPECT_FALSE(exists(file("wrote")));
  std::ofstream(file("go")).flush();
  EXPECT_EQ(wait_exit(r1.pid, 10s), 0);
  EXPECT_EQ(wait_exit(r2.pid, 10s), 0);
  EXPECT_EQ(wait_exit(writer.pid, 10s), 0);
  EXPECT_TRUE(exists(file("wrote")));
}

TEST_F(CliRecipes, FairRunsGoInArrivalOrder) {
  auto holder = start({"run", "--fair", "queue", "--", "sh", "-c", hold_until("first", "go")}, "out-0");
  ASSERT_TRUE(eventually([&] { return exists(file("first")); }, 10s));
  std::vector<Child> waiters;
  for (int i = 1; i <= 3; ++i) {
    waiters.push_back(
        start({"run", "--fair", "queue", "--", "sh", "-c", "echo " + std::to_string(i) + " >> " + file("order")},
              "out-" + std::to_string(i)));
    // In line before the next one comes (a fixed sleep was not enough on a
    // loaded machine under a sanitizer).
    ASSERT_TRUE(eventually(
        [&] {
          const auto w = status_json("queue")["waiters"];
          return w.is_number() && w.get<int>() >= i;
        },
        20s))
        << status_json("queue").dump();
  }
  EXPECT_FALSE(exists(file("order")));
  std::ofstream(file("go")).flush();
  EXPECT_EQ(wait_exit(holder.pid, 10s), 0);
  for (auto& w : waiters) EXPECT_EQ(wait_exit(w.pid, 10s), 0);
  std::ifstream in(file("order"));
  std::string order((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(order, "1\n2\n3\n");
}

TEST_F(CliRecipes, BadCombinationsAreUsageErrors) {
  const std::string ran = file("ran");
  const std::vector<std::vector<std::string>> cases = {
      {"run", "--shared", "--permits", "2", "x", "--", "touch", ran},
      {"run", "--permits", "0", "x", "--", "touch", ran},
      {"run", "--permits", "-1", "x", "--", "touch", ran},
      {"run", "--permits", "many", "x", "--", "touch", ran},
      // Counts are parsed strictly, and have one range on every backend.
      {"run", "--permits", "0x10", "x", "--", "touch", ran},
      {"run", "--permits", " 2", "x", "--", "touch", ran},
      {"run", "--permits", "2 ", "x", "--", "touch", ran},
      {"run", "--permits", "+2", "x", "--", "touch", ran},
      {"run", "--permits", "1e3", "x", "--", "touch", ran},
      {"run", "--permits", "", "x", "--", "touch", ran},
      {"run", "--permits", "2147483648", "x", "--", "touch", ran},
      {"run", "--permits", "4294967296", "x", "--", "touch", ran},
      {"elect", "--shared", "x", "--", "touch", ran},
      {"elect", "--permits", "2", "x", "--", "touch", ran},
      {"elect", "--id", std::string(kMaxHolderInfo + 1, 'i'), "x", "--", "touch", ran},
      {"elect", "x"},
  };
  for (const auto& args : cases) {
    auto r = dlock(args);
    EXPECT_EQ(r.exit_code, 64) << join_args(args) << ": " << r.err;
    EXPECT_FALSE(r.err.empty()) << join_args(args);
  }
  EXPECT_TRUE(has(dlock(cases[0]).err, "--shared and --permits")) << "names the combination";
  EXPECT_TRUE(has(dlock(cases[1]).err, "--permits takes a whole number from 1 to 2147483647, not '0'"));
  EXPECT_TRUE(has(dlock(cases[4]).err, "not '0x10'"));
  EXPECT_FALSE(exists(ran)) << "CMD ran after a usage error";
}

TEST_F(CliRecipes, TheLargestPermitCountIsTaken) {
  auto r = dlock({"run", "--permits", "2147483647", "--wait", "0", "big", "--", "touch", file("ran")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(exists(file("ran")));
}

}  // namespace
}  // namespace dlock::test

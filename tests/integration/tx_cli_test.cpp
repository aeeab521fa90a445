// `dlock tx list|show|retry` over a real log with a transaction left
// committing (its Confirm unanswered).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "dlock/tx.hpp"
#include "integration/tx_bank.hpp"
#include "support/temp_dir.hpp"

namespace dlock::tx {
namespace {

using namespace std::chrono_literals;

struct Ran {
  int code = -1;
  std::string out;
};

// Runs the dlock tool with `args` (no shell metacharacters), stdout captured.
Ran dlock_tool(const std::string& args) {
  Ran r;
  FILE* p = ::popen((std::string(DLOCK_CLI_PATH) + " " + args + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), p) != nullptr) r.out += buf.data();
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(TxCli, ListsShowsAndRetriesWhatTheLogHolds) {
  test::TempDir dir;
  Bank alice(dir.file("alice.db"), 100), bob(dir.file("bob.db"), 50);
  const std::string url = "sqlite://" + dir.file("tx.db");
  CoordinatorOptions o;
  o.finish_within = 0ms;
  auto c = Coordinator::open(url, o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  c->add_participant("alice", alice.debit());
  c->add_participant("bob",
                     {bob.credit().try_, [](const BranchContext&) { return Outcome::unknown; }, bob.credit().cancel});
  auto r = c->run("order-7", {{"alice", "5"}, {"bob", "5"}});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(*r, State::committing);

  const Ran list = dlock_tool("--url " + url + " tx list");
  EXPECT_EQ(list.code, 0);
  EXPECT_NE(list.out.find("order-7: committing"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("branch 1 bob: not done, 1 failed attempt"), std::string::npos) << list.out;

  const Ran show = dlock_tool("--url " + url + " tx show order-7 --json");
  ASSERT_EQ(show.code, 0);
  const auto j = nlohmann::json::parse(show.out);
  EXPECT_EQ(j["state"], "committing");
  ASSERT_EQ(j["branches"].size(), 2u);
  EXPECT_EQ(j["branches"][0]["done"], true);
  EXPECT_EQ(j["branches"][1]["attempts"], 1);

  EXPECT_EQ(dlock_tool("--url " + url + " tx retry order-7").code, 0);
  EXPECT_NE(dlock_tool("--url " + url + " tx retry no-such-gid").code, 0);
  EXPECT_EQ(dlock_tool("--url " + url + " tx show").code, 64) << "show needs a transaction id";
  EXPECT_EQ(dlock_tool("--url " + url + " tx drop order-7").code, 64);
  EXPECT_EQ(dlock_tool("--url redis://127.0.0.1:1 tx list").code, 64) << "a log is at sqlite:// or postgres://";
}

}  // namespace
}  // namespace dlock::tx

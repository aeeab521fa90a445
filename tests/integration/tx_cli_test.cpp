// `dlock tx list|show|retry` over a real log with a transaction left
// committing (its Confirm unanswered), and --json when a branch's last
// error holds bytes that are not UTF-8, or were cut inside a character.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "common/http_service.hpp"
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

// Runs the dlock tool with `args` (no shell metacharacters), stdout (and
// with `with_stderr`, stderr) captured.
Ran dlock_tool(const std::string& args, bool with_stderr = false) {
  Ran r;
  FILE* p = ::popen((std::string(DLOCK_CLI_PATH) + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null")).c_str(), "r");
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
  o.finish_within = 200ms;  // one Confirm each: bob's fails, and its retry is due after run() returned
  o.retry_base = 1000ms;
  o.retry_cap = 1000ms;
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

// The read-only commands never create a log: a mistyped path is an error
// (66, EX_NOINPUT) naming the path, and no file appears; a missing
// directory is named once-slashed, also from "sqlite:///" put before an
// absolute path (sqlite:////tmp/x.db is /tmp/x.db; it was shown as //tmp).
TEST(TxCli, AMistypedLogPathIsAnErrorAndCreatesNothing) {
  test::TempDir dir;
  const std::string path = dir.file("mistyped.db");
  for (const std::string command : {"tx list", "tx show order-7", "tx retry order-7", "tx list --json"}) {
    const Ran r = dlock_tool("--url sqlite://" + path + " " + command, true);
    EXPECT_EQ(r.code, 66) << command << ": " << r.out;
    EXPECT_NE(r.out.find("no transaction log at " + path + " (nothing was created)"), std::string::npos)
        << command << ": " << r.out;
    EXPECT_FALSE(std::filesystem::exists(path)) << command;
    EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << command << ": no journal or wake-up file either";
  }

  const std::string in_missing_dir = dir.file("no-such-dir/tx.db");
  for (const std::string scheme : {"sqlite://", "sqlite:///"}) {
    const Ran r = dlock_tool("--url " + scheme + in_missing_dir + " tx list", true);
    EXPECT_EQ(r.code, 66) << scheme << ": " << r.out;
    EXPECT_NE(r.out.find("no transaction log at " + in_missing_dir + " (nothing was created)"), std::string::npos)
        << scheme << ": " << r.out;
    EXPECT_EQ(r.out.find("//" + in_missing_dir.substr(1)), std::string::npos) << scheme << ": one slash: " << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir.file("no-such-dir")));
  }
}

// A participant's answer that is not ASCII, cut at the 200 bytes a branch's
// last error keeps, in the middle of a character: the error is cut on a
// character boundary. An in-process participant's error with bytes that are
// not UTF-8 is kept as it is, and `tx list --json` and `tx show --json`
// print it with a replacement character. Before, both exited 70
// ("incomplete UTF-8 string").
TEST(TxCli, JsonOfAnErrorThatIsNotUtf8IsPrinted) {
  test::TempDir dir;
  Bank alice(dir.file("alice.db"), 100), bob(dir.file("bob.db"), 50);
  const std::string answer = std::string(199, 'x') + "\xC3\xA9\xE2\x80\xA6";  // 199 x, then "é…"
  tools::HttpService service(
      [&](const std::string& target, const std::string& body) -> std::optional<tools::HttpAnswer> {
        auto c = branch_from_http(target, body);
        if (c.ok() && c->op == Op::confirm) return tools::HttpAnswer{500, answer};
        auto reply = handle_http(target, body, bob.credit().try_);
        return tools::HttpAnswer{reply.status, reply.body};
      });
  const std::string url = "sqlite://" + dir.file("tx.db");
  CoordinatorOptions o;
  o.finish_within = 300ms;  // Confirms asked again for 0.3 s, then left for recovery
  o.retry_base = 20ms;
  auto c = Coordinator::open(url, o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  HttpParticipant endpoints;
  endpoints.try_url = service.url("/try");
  endpoints.confirm_url = service.url("/confirm");
  endpoints.cancel_url = service.url("/cancel");
  Participant http = http_participant(endpoints).value();
  c->add_participant("alice", alice.debit());
  // Bob's Confirm without the coordinator's deadline: its last attempt is
  // answered too, never cut, and leaves the answer as the last error.
  c->add_participant("bob", {http.try_,
                             [confirm = http.confirm](BranchContext ctx) {
                               ctx.deadline = std::chrono::steady_clock::time_point::max();
                               return confirm(ctx);
                             },
                             http.cancel});
  c->add_participant(
      "carol", {bob.credit().try_, [](const BranchContext&) -> Outcome { throw std::runtime_error("caf\xC3 \xFF!"); },
                bob.credit().cancel});
  auto r = c->run("order-8", {{"alice", "5"}, {"bob", "5"}});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(*r, State::committing);
  r = c->run("order-9", {{"alice", "5"}, {"carol", "5"}});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(*r, State::committing);
  auto info = c->show("order-8");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->branches[1].last_error, "threw: confirm answered HTTP 500: " + std::string(199, 'x') + "...")
      << "cut on the character's first byte";

  const Ran list = dlock_tool("--url " + url + " tx list --json");
  ASSERT_EQ(list.code, 0);
  const auto all = nlohmann::json::parse(list.out, nullptr, false);
  ASSERT_FALSE(all.is_discarded()) << list.out;
  ASSERT_EQ(all.size(), 2u) << list.out;

  const Ran show8 = dlock_tool("--url " + url + " tx show order-8 --json");
  ASSERT_EQ(show8.code, 0);
  const auto j8 = nlohmann::json::parse(show8.out, nullptr, false);
  ASSERT_FALSE(j8.is_discarded()) << show8.out;
  EXPECT_EQ(j8["branches"][1]["last_error"], "threw: confirm answered HTTP 500: " + std::string(199, 'x') + "...");

  const Ran show9 = dlock_tool("--url " + url + " tx show order-9 --json");
  ASSERT_EQ(show9.code, 0);
  const auto j9 = nlohmann::json::parse(show9.out, nullptr, false);
  ASSERT_FALSE(j9.is_discarded()) << show9.out;
  EXPECT_EQ(j9["branches"][1]["last_error"], "threw: caf\xEF\xBF\xBD \xEF\xBF\xBD!") << "each bad byte a U+FFFD";
}

}  // namespace
}  // namespace dlock::tx

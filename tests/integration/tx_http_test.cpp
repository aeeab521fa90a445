// TCC over HTTP participants: real HTTP services (each keeping its money in
// its own SQLite database behind the barrier, answering through
// handle_http) called by http_participant, with answers lost, refused,
// delayed and "not yet"; a service down and back on its port; HTTPS with a
// real TLS server.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "common/http_service.hpp"
#include "dlock/tx.hpp"
#include "integration/tx_bank.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace dlock::tx {
namespace {

using namespace std::chrono_literals;
using tools::HttpAnswer;
using tools::HttpService;

bool take(std::atomic<int>& n) {
  int v = n.load();
  while (v > 0)
    if (n.compare_exchange_weak(v, v - 1)) return true;
  return false;
}

// A bank's participant calls behind a real HTTP service, with faults to
// switch on (each counts down one use).
class BankService {
 public:
  BankService(Participant calls, int port = 0)
      : calls_(std::move(calls)),
        http_([this](const std::string& target, const std::string& body) { return answer(target, body); }, port) {}

  HttpParticipant endpoints(milliseconds timeout = 2000ms) const {
    HttpParticipant p;
    p.try_url = http_.url("/try");
    p.confirm_url = http_.url("/confirm?from=test");  // a query of its own is kept
    p.cancel_url = http_.url("/cancel");
    p.timeout = timeout;
    p.headers = {{"Authorization", "Bearer not-logged"}};
    return p;
  }
  int port() const { return http_.port(); }
  int requests() const { return http_.requests(); }

  std::atomic<int> lose_confirm_answers{0};  // the Confirm runs, its answer is lost
  std::atomic<int> unavailable_confirms{0};  // 503, nothing done
  std::atomic<int> ongoing_confirms{0};      // 425, nothing done
  std::atomic<int> slow_tries{0};            // the answer comes after slow_ms
  int slow_ms = 0;
  std::atomic<int> cancels_seen{0};

  // Random faults on every call, each with its percent chance, from a
  // seeded generator: what a hostile network does to a participant.
  struct Chaos {
    int late = 0;    // acted on only after late_ms (delayed in the network: a Cancel may overtake it)
    int refuse = 0;  // 503, nothing done
    int drop = 0;    // acted on, the answer lost
    int twice = 0;   // delivered twice; the second answer is sent
    int late_ms = 0;
  };
  void unleash(Chaos chaos, unsigned seed) {
    std::lock_guard lock(chaos_mu_);
    chaos_ = chaos;
    rng_.seed(seed);
  }
  std::atomic<int> faults{0};  // faults that happened

 private:
  bool roll(int Chaos::*kind) {
    std::lock_guard lock(chaos_mu_);
    const bool hit = std::uniform_int_distribution<int>(0, 99)(rng_) < chaos_.*kind;
    faults += hit;
    return hit;
  }

  std::optional<HttpAnswer> answer(const std::string& target, const std::string& body) {
    if (roll(&Chaos::refuse)) return HttpAnswer{503, "refused"};
    if (roll(&Chaos::late)) {
      int ms;
      {
        std::lock_guard lock(chaos_mu_);
        ms = chaos_.late_ms;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
    auto reply = act(target, body);
    if (reply && roll(&Chaos::twice)) reply = act(target, body);
    if (reply && roll(&Chaos::drop)) return std::nullopt;
    return reply;
  }

  std::optional<HttpAnswer> act(const std::string& target, const std::string& body) {
    auto ctx = branch_from_http(target, body);
    if (ctx.ok() && ctx->op == Op::confirm) {
      if (take(unavailable_confirms)) return HttpAnswer{503, "busy"};
      if (take(ongoing_confirms)) return HttpAnswer{425, R"({"dtm_result":"ONGOING"})"};
    }
    if (ctx.ok() && ctx->op == Op::cancel) ++cancels_seen;
    const bool slow = ctx.ok() && ctx->op == Op::try_ && take(slow_tries);
    HttpReply reply = handle_http(target, body, [&](const BranchContext& c) {
      if (target.find("/confirm?from=test&") == std::string::npos && c.op == Op::confirm)
        return Outcome::unknown;  // the URL's own query was lost
      return (c.op == Op::try_ ? calls_.try_ : c.op == Op::confirm ? calls_.confirm : calls_.cancel)(c);
    });
    if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
    if (ctx.ok() && ctx->op == Op::confirm && take(lose_confirm_answers)) return std::nullopt;
    return HttpAnswer{reply.status, reply.body};
  }

  std::mutex chaos_mu_;
  Chaos chaos_;       // under chaos_mu_
  std::mt19937 rng_;  // under chaos_mu_
  Participant calls_;
  HttpService http_;
};

class TxHttp : public TwoBanksTest {
 protected:
  Coordinator open(CoordinatorOptions o = {}) {
    o.retry_base = 10ms;
    o.retry_cap = 50ms;
    auto c = Coordinator::open("sqlite://" + dir.file("tx.db"), std::move(o));
    if (!c.ok()) throw Error(c.status());
    c->add_participant("alice", http_participant(alice_http.endpoints()).value());
    c->add_participant("bob", http_participant(bob_http->endpoints()).value());
    return std::move(*c);
  }

  BankService alice_http{alice.debit()};
  std::unique_ptr<BankService> bob_http = std::make_unique<BankService>(bob.credit());
};

TEST_F(TxHttp, AnOrderOverTwoServicesCommitsAndOneTheyRefuseRollsBack) {
  auto c = open();
  auto r = c.run("h1", transfer(30));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, State::committed);
  EXPECT_EQ(alice.column("balance"), 70);
  EXPECT_EQ(bob.column("balance"), 80);
  EXPECT_EQ(alice_http.requests(), 2) << "one Try, one Confirm";
  expect_settled();

  auto refused = c.run("h2", transfer(500));  // alice has 70: her service answers 409
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), Errc::aborted);
  EXPECT_NE(refused.status().message().find("branch 0 Try failed"), std::string::npos) << refused.status().to_string();
  EXPECT_EQ(alice.column("balance"), 70);
  EXPECT_EQ(bob.column("balance"), 80);
  expect_settled();
  EXPECT_EQ(c.show("h2")->state, State::aborted);
}

// An answer lost after the work was done, a 503 and two "not yet"s: each is
// asked again, and the barrier makes the repeat a no-op (the money moves
// exactly once).
TEST_F(TxHttp, LostAndRefusedAnswersAreAskedAgainAndTheRepeatChangesNothing) {
  auto c = open();
  // Two: the first drop, on a kept connection, is retried at once by the
  // client (it cannot tell it from a server closing an idle connection);
  // the second, on a fresh one, is the coordinator's to ask again.
  bob_http->lose_confirm_answers = 2;
  bob_http->unavailable_confirms = 1;
  alice_http.ongoing_confirms = 2;
  auto r = c.run("h3", transfer(40));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, State::committed);
  EXPECT_EQ(alice.column("balance"), 60);
  EXPECT_EQ(bob.column("balance"), 90) << "the credit was booked once, though Confirm was sent three times";
  expect_settled();
  EXPECT_EQ(bob_http->lose_confirm_answers.load() + bob_http->unavailable_confirms.load() +
                alice_http.ongoing_confirms.load(),
            0)
      << "every fault was met";
  EXPECT_GE(c.stats().branch_failures, 4u) << "a lost answer, a 503, two ongoing";
}

// A Try whose answer comes too late is unknown: the transaction aborts at
// its deadline and the Cancel undoes what the late Try did.
TEST_F(TxHttp, ATryAnsweredPastTheTimeoutIsUnknownAndItsCancelUndoesIt) {
  CoordinatorOptions o;
  o.timeout = 1500ms;
  auto c = open(o);
  c.add_participant("alice", http_participant(alice_http.endpoints(200ms)).value());
  alice_http.slow_ms = 400;
  alice_http.slow_tries = 100;  // every Try
  auto r = c.run("h4", transfer(30));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::aborted);
  auto info = recover_until_finished(c, "h4");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->state, State::aborted);
  EXPECT_EQ(alice.column("balance"), 100) << "the frozen money came back";
  EXPECT_EQ(bob.column("balance"), 50);
  expect_settled();
  EXPECT_GE(alice_http.cancels_seen.load(), 1);
}

// A service down when the transaction starts: its Try cannot be answered,
// the transaction aborts, and its Cancel waits until the service is back on
// its port (recovery), while the other branch is cancelled at once.
TEST_F(TxHttp, AServiceDownAbortsAndRecoveryCancelsWhenItComesBack) {
  CoordinatorOptions o;
  o.timeout = 500ms;
  o.finish_within = 200ms;
  auto c = open(o);
  const int port = bob_http->port();
  bob_http.reset();  // connections refused from now on
  auto r = c.run("h5", transfer(30));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::aborted);
  auto info = c.show("h5");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, State::aborting) << "bob's Cancel cannot be delivered yet";
  EXPECT_NE(info->branches[1].last_error.find("connecting"), std::string::npos) << info->branches[1].last_error;
  EXPECT_EQ(info->branches[1].last_error.find("not-logged"), std::string::npos) << "a header's value was logged";
  bob_http = std::make_unique<BankService>(bob.credit(), port);
  info = recover_until_finished(c, "h5");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->state, State::aborted);
  EXPECT_GE(bob_http->cancels_seen.load(), 1);
  EXPECT_EQ(alice.column("balance"), 100);
  expect_settled();
}

// Anti-suspension over HTTP: a Cancel that arrives before its Try (the Try
// was delayed in the network) succeeds with nothing to undo, and the late
// Try then does nothing (it answers success, as a repeat does: the
// transaction it belonged to is aborting already).
TEST_F(TxHttp, ACancelBeforeItsTryIsEmptyAndTheLateTryDoesNothing) {
  Participant p = http_participant(alice_http.endpoints()).value();
  BranchContext ctx{"h6", 0, Op::cancel, "30"};
  EXPECT_EQ(p.cancel(ctx), Outcome::success);
  ctx.op = Op::try_;
  EXPECT_EQ(p.try_(ctx), Outcome::success);
  EXPECT_EQ(alice.calls.load(), 0) << "no business statement ran: a Try after its Cancel must not";
  EXPECT_EQ(alice_http.requests(), 2);
  EXPECT_EQ(alice.column("balance"), 100);
}

TEST_F(TxHttp, BadInputIsRefusedWithAClearError) {
  auto bad = [](HttpParticipant p) {
    auto r = http_participant(std::move(p));
    EXPECT_EQ(r.code(), Errc::invalid_argument);
    return r.ok() ? std::string() : r.status().message();
  };
  HttpParticipant ok = alice_http.endpoints();
  auto with = [&](auto change) {
    HttpParticipant p = ok;
    change(p);
    return p;
  };
  EXPECT_NE(bad(with([](auto& p) { p.try_url = "ftp://127.0.0.1/x"; })).find("http://"), std::string::npos);
  EXPECT_NE(bad(with([](auto& p) { p.confirm_url = "http://:80/x"; })).find("no host"), std::string::npos);
  EXPECT_NE(bad(with([](auto& p) { p.cancel_url = "http://h:99999/"; })).find("port"), std::string::npos);
  EXPECT_NE(bad(with([](auto& p) { p.try_url = "http://u:pw@h/"; })).find("user info"), std::string::npos);
  EXPECT_NE(bad(with([](auto& p) {
              p.headers = {{"X-A", "1\r\nX-Injected: 2"}};
            })).find("line break"),
            std::string::npos);
  EXPECT_NE(bad(with([](auto& p) { p.timeout = 0ms; })).find("timeout"), std::string::npos);
  EXPECT_NE(bad(with([](auto& p) {
              p.try_url = "https://127.0.0.1:1/x";
              p.ca_file = "/nonexistent/ca.pem";
            })).find("CA file"),
            std::string::npos);

  EXPECT_EQ(branch_from_http("/try", "").code(), Errc::invalid_argument);
  EXPECT_EQ(branch_from_http("/try?gid=g&op=try", "").code(), Errc::invalid_argument);  // no branch_id
  EXPECT_EQ(branch_from_http("/try?gid=g&branch_id=-1&op=try", "").code(), Errc::invalid_argument);
  EXPECT_EQ(branch_from_http("/try?gid=g&branch_id=0&op=commit", "").code(), Errc::invalid_argument);
  EXPECT_EQ(branch_from_http("/try?gid=%zz&branch_id=0&op=try", "").code(), Errc::invalid_argument);
  auto c = branch_from_http("/x?gid=a%2Fb%20c&trans_type=tcc&branch_id=3&op=cancel", "{}");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->gid, "a/b c");
  EXPECT_EQ(c->branch, 3);
  EXPECT_EQ(c->op, Op::cancel);
  EXPECT_EQ(c->payload, "{}");
  EXPECT_EQ(handle_http("/x", "", [](const BranchContext&) { return Outcome::success; }).status, 400);
  EXPECT_EQ(http_reply(Outcome::failure).status, 409);
  EXPECT_EQ(http_reply(Outcome::ongoing).status, 425);
  EXPECT_EQ(http_reply(Outcome::unknown).status, 500);
}

// Many transfers at once over kept connections: every answer is a decision
// and the money is exact.
TEST_F(TxHttp, ConcurrentOrdersShareConnectionsAndConserveMoney) {
  auto c = open();
  Tally tally;
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i)
    threads.emplace_back([&, i] { tally.add(c.run("many-" + std::to_string(i), transfer(15))); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(tally.committed.load(), 6) << "alice's 100 pays six transfers of 15";
  EXPECT_EQ(tally.committed + tally.aborted, 16);
  expect_settled();
}

// The verifier's checks over random faults on every call of both
// services: delayed past the caller's timeout (so a Cancel may overtake
// its Try), refused, acted on with the answer lost, delivered twice. After
// recovery, whatever happened: every transaction finished; in each bank's
// barrier a committed one has its Confirm and no Cancel, an aborted one no
// Confirm; the money is exact and nothing is left frozen or in flight.
TEST_F(TxHttp, RandomFaultsOnEveryCallNeverBreakAtomicity) {
  CoordinatorOptions o;
  o.timeout = 800ms;
  o.finish_within = 1000ms;
  auto c = open(o);
  c.add_participant("alice", http_participant(alice_http.endpoints(150ms)).value());
  c.add_participant("bob", http_participant(bob_http->endpoints(150ms)).value());
  const BankService::Chaos chaos{15, 10, 10, 10, 250};
  std::vector<std::string> gids;
  for (unsigned seed : {11u, 12u, 13u}) {
    alice_http.unleash(chaos, seed);
    bob_http->unleash(chaos, seed * 7);
    std::vector<std::thread> threads;
    std::mutex mu;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 5; ++i) {
          const std::string gid = "chaos-" + std::to_string(seed) + "-" + std::to_string(t) + "-" + std::to_string(i);
          (void)c.run(gid, transfer(5));  // any answer: the checks below judge the outcome
          std::lock_guard lock(mu);
          gids.push_back(gid);
        }
      });
    for (auto& th : threads) th.join();
  }
  alice_http.unleash({}, 0);
  bob_http->unleash({}, 0);
  int committed = 0;
  for (const auto& gid : gids) {
    auto info = recover_until_finished(c, gid, 20s);
    ASSERT_TRUE(info.ok()) << gid << ": " << info.status().to_string();
    ASSERT_TRUE(finished(info->state)) << gid << " is still " << to_string(info->state);
    committed += info->state == State::committed;
  }
  std::this_thread::sleep_for(400ms);  // requests still delayed in the "network" land now
  for (const auto& gid : gids) {
    const bool yes = c.show(gid)->state == State::committed;
    for (Bank* bank : {&alice, &bob}) {
      const std::string ops = bank->barrier_ops(gid);
      if (yes) {
        EXPECT_NE(ops.find("confirm"), std::string::npos) << gid << " committed, but a bank has " << ops;
        EXPECT_EQ(ops.find("cancel"), std::string::npos) << gid << " committed, but a bank has " << ops;
      } else {
        EXPECT_EQ(ops.find("confirm"), std::string::npos) << gid << " aborted, but a bank has " << ops;
      }
    }
  }
  EXPECT_EQ(alice.column("balance"), 100 - 5 * committed);
  EXPECT_EQ(bob.column("balance"), 50 + 5 * committed);
  expect_settled();
  EXPECT_GT(alice_http.faults + bob_http->faults, 20) << "the faults happened";
  RecordProperty("transactions", static_cast<int>(gids.size()));
  RecordProperty("committed", committed);
  RecordProperty("faults", alice_http.faults + bob_http->faults);
}

// HTTPS against a real TLS server (Python's, with a certificate from a
// throw-away CA for 127.0.0.1): trusted through ca_file it is called; with
// the system's CAs, or under a name the certificate does not carry, it is
// not.
class TxHttps : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string d = dir.path();
    std::ofstream(d + "/san.cnf") << "subjectAltName=IP:127.0.0.1\n";
    for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
             {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
              d + "/ca.key", "-out", d + "/ca.crt", "-days", "2", "-subj", "/CN=dlock test CA"},
             {"openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
              d + "/server.key", "-out", d + "/server.csr", "-subj", "/CN=127.0.0.1"},
             {"openssl", "x509", "-req", "-in", d + "/server.csr", "-CA", d + "/ca.crt", "-CAkey", d + "/ca.key",
              "-CAcreateserial", "-out", d + "/server.crt", "-days", "2", "-extfile", d + "/san.cnf"}}) {
      auto r = test::run(argv, 30s);
      ASSERT_EQ(r.exit_code, 0) << test::join_args(argv) << ": " << r.err;
    }
    std::ofstream(d + "/server.py") << R"(import http.server, os, ssl, sys
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b'{"dtm_result":"SUCCESS"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[1], sys.argv[2])
server.socket = context.wrap_socket(server.socket, server_side=True)
with open(sys.argv[3] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(sys.argv[3] + ".tmp", sys.argv[3])
server.serve_forever()
)";
    server = test::spawn({"python3", d + "/server.py", d + "/server.crt", d + "/server.key", d + "/port"}, {},
                         d + "/server.log");
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < until && !(std::ifstream(d + "/port") >> port))
      std::this_thread::sleep_for(20ms);
    ASSERT_GT(port, 0) << "the TLS server did not start";
  }
  void TearDown() override {
    if (server.pid > 0) {
      ::kill(server.pid, SIGKILL);
      test::wait_exit(server.pid, 5s);
    }
  }
  HttpParticipant endpoints(const std::string& host) const {
    HttpParticipant p;
    p.try_url = p.confirm_url = p.cancel_url = "https://" + host + ":" + std::to_string(port) + "/tcc";
    p.ca_file = dir.file("ca.crt");
    return p;
  }
  std::string refused_because(HttpParticipant p) {
    auto calls = http_participant(std::move(p));
    if (!calls.ok()) return calls.status().to_string();
    try {
      return "answered " + std::string(to_string(calls->try_({"s1", 0, Op::try_, "{}"})));
    } catch (const std::exception& e) {
      return e.what();
    }
  }

  test::TempDir dir;
  test::Child server;
  int port = 0;
};

TEST_F(TxHttps, ATrustedServerIsCalledAndAnUnverifiedOneIsNot) {
  auto calls = http_participant(endpoints("127.0.0.1"));
  ASSERT_TRUE(calls.ok()) << calls.status().to_string();
  EXPECT_EQ(calls->try_({"s1", 0, Op::try_, "{}"}), Outcome::success);
  EXPECT_EQ(calls->confirm({"s1", 0, Op::confirm, "{}"}), Outcome::success) << "over the kept connection";

  HttpParticipant system_cas = endpoints("127.0.0.1");
  system_cas.ca_file.clear();
  EXPECT_NE(refused_because(system_cas).find("certificate verify failed"), std::string::npos)
      << refused_because(system_cas);
  const std::string wrong_name = refused_because(endpoints("localhost"));  // the certificate names 127.0.0.1
  EXPECT_TRUE(wrong_name.find("certificate verify failed") != std::string::npos ||
              wrong_name.find("connecting") != std::string::npos)
      << wrong_name;
  EXPECT_EQ(wrong_name.find("answered"), std::string::npos) << wrong_name;
}

}  // namespace
}  // namespace dlock::tx

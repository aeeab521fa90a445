// TCC over HTTP participants: real HTTP services (each keeping its money in
// its own SQLite database behind the barrier, answering through
// handle_http) called by http_participant, with answers lost, refused,
// delayed and "not yet"; wrong bytes on the wire (interim responses, an
// answer written twice, junk after it); a service down and back on its
// port, a host gone past a call's deadline; HTTPS with a real TLS server.
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
#include "support/tcp_fault.hpp"
#include "support/temp_dir.hpp"

namespace dlock::tx {
namespace {

using namespace std::chrono_literals;
using tools::HttpAnswer;
using tools::HttpService;

// A legal interim response (RFC 9110 15.2), and bytes that are no HTTP.
const std::string kEarlyHints = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n";
const std::string kJunk = std::string("\0\x17junk\r\n\r\n", 10);

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
    // Wrong bytes on the wire around a right answer:
    int interim = 0;       // a 103 Early Hints before it
    int doubled = 0;       // the answer written twice, in one write
    int doubled_late = 0;  // its copy written 20 ms later
    int garble = 0;        // junk after it
  };
  void unleash(Chaos chaos, unsigned seed) {
    std::lock_guard lock(chaos_mu_);
    chaos_ = chaos;
    rng_.seed(seed);
  }
  std::atomic<int> faults{0};  // faults that happened

  // Changes the wire form of every answer to a well-formed request (its
  // phase given): interim responses, doubled answers, junk. Runs under a
  // lock, one answer at a time.
  void tamper(std::function<void(Op, HttpAnswer&)> f) {
    std::lock_guard lock(chaos_mu_);
    tamper_ = std::move(f);
  }

 private:
  bool roll(int Chaos::*kind) {
    std::lock_guard lock(chaos_mu_);
    if (chaos_.*kind <= 0) return false;  // no draw: another kind's sequence stays as it was
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
    if (reply && roll(&Chaos::interim)) reply->interim = kEarlyHints;
    if (reply && roll(&Chaos::doubled)) reply->twice = true;
    if (reply && roll(&Chaos::doubled_late)) {
      reply->twice = true;
      reply->second_after = 20ms;
    }
    if (reply && roll(&Chaos::garble)) reply->trailing_garbage = kJunk;
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
    HttpAnswer answer{reply.status, reply.body};
    if (ctx.ok()) {
      std::lock_guard lock(chaos_mu_);
      if (tamper_) tamper_(ctx->op, answer);
    }
    return answer;
  }

  std::mutex chaos_mu_;
  Chaos chaos_;                                  // under chaos_mu_
  std::mt19937 rng_;                             // under chaos_mu_
  std::function<void(Op, HttpAnswer&)> tamper_;  // under chaos_mu_
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

  // Transfers of 5 on 4 threads, 20 under each of three seeds of `chaos`;
  // then recovery and the checks of RandomFaultsOnEveryCallNeverBreakAtomicity.
  void run_under(const BankService::Chaos& chaos) {
    CoordinatorOptions o;
    o.timeout = 800ms;
    o.finish_within = 1000ms;
    auto c = open(o);
    c.add_participant("alice", http_participant(alice_http.endpoints(150ms)).value());
    c.add_participant("bob", http_participant(bob_http->endpoints(150ms)).value());
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

// A participant may send interim responses (1xx, RFC 9110 15.2) before its
// answer: the client reads past them. Read as the answer, the 103 left the
// real one unread on a kept connection, and every later call on it read the
// answer of the call before: the next transaction's refused Try read as a
// success and committed.
TEST_F(TxHttp, InterimResponsesAreReadPastAndTheNextRefusedTryAborts) {
  auto c = open();
  int interim = 1;  // under BankService's lock
  alice_http.tamper([&](Op op, HttpAnswer& a) {
    if (op == Op::try_ && interim-- > 0) a.interim = kEarlyHints;
  });
  auto r = c.run("e1", transfer(30));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, State::committed);
  EXPECT_EQ(alice.column("balance"), 70);
  EXPECT_EQ(bob.column("balance"), 80);

  auto refused = c.run("e2", transfer(500));  // alice has 70: her service answers 409
  EXPECT_EQ(refused.code(), Errc::aborted)
      << (refused.ok() ? "e2 ended " + std::string(to_string(*refused)) : refused.status().to_string());
  EXPECT_EQ(c.show("e2")->state, State::aborted);
  EXPECT_EQ(alice.barrier_ops("e2").find("confirm"), std::string::npos) << alice.barrier_ops("e2");
  EXPECT_EQ(bob.barrier_ops("e2").find("confirm"), std::string::npos) << bob.barrier_ops("e2");
  EXPECT_EQ(alice.column("balance"), 70);
  EXPECT_EQ(bob.column("balance"), 80);
  expect_settled();

  // Several interim responses in a row, 100 Continue among them.
  alice_http.tamper([](Op, HttpAnswer& a) { a.interim = "HTTP/1.1 100 Continue\r\n\r\n" + kEarlyHints + kEarlyHints; });
  Participant p = http_participant(alice_http.endpoints()).value();
  EXPECT_EQ(p.try_({"e3", 0, Op::try_, "500"}), Outcome::failure);
  EXPECT_EQ(p.try_({"e4", 0, Op::try_, "10"}), Outcome::success);
  EXPECT_EQ(p.cancel({"e4", 0, Op::cancel, "10"}), Outcome::success);
  expect_settled();
}

// 101 Switching Protocols says the connection now speaks something else:
// the client cannot frame what follows, so the call is unknown and the
// connection is closed, never read for a later call.
TEST_F(TxHttp, SwitchingProtocolsIsUnknownAndItsConnectionIsNotReused) {
  int upgrade = 1;  // under BankService's lock
  alice_http.tamper([&](Op, HttpAnswer& a) {
    if (upgrade-- > 0) a.interim = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n";
  });
  Participant p = http_participant(alice_http.endpoints()).value();
  try {
    const Outcome o = p.try_({"u1", 0, Op::try_, "30"});
    ADD_FAILURE() << "a 101 answered " << to_string(o);
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("101"), std::string::npos) << e.what();
  }
  EXPECT_EQ(p.try_({"u2", 0, Op::try_, "500"}), Outcome::failure) << "u1's answer read as u2's";
  EXPECT_EQ(p.cancel({"u1", 0, Op::cancel, "30"}), Outcome::success);
  expect_settled();
}

// Wrong bytes after a right answer, as a participant's HTTP server wrote
// them: the answer twice (a proxy's retry, a buggy handler), in one write
// or its copy 20 ms later, or junk after it.
struct Wire {
  const char* name;
  bool twice;
  std::string junk;
  milliseconds after;  // when the extra bytes follow the answer
};

void PrintTo(const Wire& w, std::ostream* os) { *os << w.name; }

class TxHttpWire : public TxHttp, public ::testing::WithParamInterface<Wire> {};

// Under each of those, on every answer of both services: the connection is
// closed, and no later call reads those bytes as its own answer. A
// transfer commits; the next one, which alice's service refuses, aborts
// and neither service sees its Confirm. Before, the copy was the next
// call's answer: a Try that alice's service refused read as success, the
// transaction committed and both services got its Confirm.
TEST_P(TxHttpWire, ExtraBytesAfterAnAnswerNeverLetARefusedTryCommit) {
  const Wire& w = GetParam();
  CoordinatorOptions o;
  o.timeout = 2000ms;
  o.finish_within = 3000ms;
  auto c = open(o);
  for (BankService* s : {&alice_http, bob_http.get()})
    s->tamper([&w](Op, HttpAnswer& a) {
      a.twice = w.twice;
      a.trailing_garbage = w.junk;
      a.second_after = w.after;
    });
  for (int round = 0; round < 3; ++round) {
    const std::string ok = "ok-" + std::to_string(round), no = "no-" + std::to_string(round);
    const auto failures = c.stats().branch_failures;
    auto r = c.run(ok, transfer(10));
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    auto info = recover_until_finished(c, ok);
    ASSERT_TRUE(info.ok()) << info.status().to_string();
    EXPECT_EQ(info->state, State::committed);
    if (w.after == 0ms) {  // the extra bytes came with the answer
      EXPECT_EQ(c.stats().branch_failures, failures) << ok << ": a call read another call's bytes";
    }

    auto refused = c.run(no, transfer(500));  // more than alice has: her service answers 409
    EXPECT_EQ(refused.code(), Errc::aborted)
        << (refused.ok() ? no + " ended " + std::string(to_string(*refused)) : refused.status().to_string());
    info = recover_until_finished(c, no);
    ASSERT_TRUE(info.ok()) << info.status().to_string();
    EXPECT_EQ(info->state, State::aborted);
    EXPECT_EQ(alice.barrier_ops(no).find("confirm"), std::string::npos) << no << ": " << alice.barrier_ops(no);
    EXPECT_EQ(bob.barrier_ops(no).find("confirm"), std::string::npos) << no << ": " << bob.barrier_ops(no);
  }
  EXPECT_EQ(alice.column("balance"), 70);
  EXPECT_EQ(bob.column("balance"), 80);
  expect_settled();
}

INSTANTIATE_TEST_SUITE_P(, TxHttpWire,
                         ::testing::Values(Wire{"Twice", true, "", 0ms}, Wire{"TwiceLate", true, "", 20ms},
                                           Wire{"Junk", false, kJunk, 0ms}, Wire{"JunkLate", false, kJunk, 20ms},
                                           Wire{"TwiceAndJunk", true, kJunk, 0ms}),
                         [](const ::testing::TestParamInfo<Wire>& i) { return std::string(i.param.name); });

// The copy of an answer that comes after its connection went back to the
// pool is what the next call on it reads first: the request id the client
// adds to each call (rid), echoed by handle_http, shows it is another
// call's answer, and the call is unknown (the connection closed), not the
// earlier call's success. handle_http echoes a rid only if it is a plain
// token.
TEST_F(TxHttp, AnAnswerToAnotherRequestIsCaughtByItsRid) {
  int copies = 1;  // under BankService's lock
  std::atomic<int> answered{0};
  alice_http.tamper([&](Op, HttpAnswer& a) {
    ++answered;  // the call's work is done
    if (copies-- <= 0) return;
    a.twice = true;
    a.second_after = 1000ms;  // d2 goes out well before it, even on a loaded host
  });
  Participant p = http_participant(alice_http.endpoints()).value();
  EXPECT_EQ(p.try_({"d1", 0, Op::try_, "30"}), Outcome::success);
  try {  // at once, on the kept connection: d1's copy comes before d2's answer
    const Outcome o = p.try_({"d2", 0, Op::try_, "500"});
    ADD_FAILURE() << "d2, refused by the service, answered " << to_string(o);
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rid"), std::string::npos) << e.what();
  }
  // The service reads d2 once d1's copy is out, after the call gave up on
  // that connection: d3 goes once d2 is done, or the two calls would meet
  // on the one connection to alice's database (answered unknown).
  for (int i = 0; i < 1000 && answered.load() < 2; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(answered.load(), 2) << "the service never answered d2";
  EXPECT_EQ(p.try_({"d3", 0, Op::try_, "500"}), Outcome::failure) << "on a new connection";
  EXPECT_EQ(p.cancel({"d1", 0, Op::cancel, "30"}), Outcome::success);
  expect_settled();

  auto success = [](const BranchContext&) { return Outcome::success; };
  EXPECT_EQ(handle_http("/t?gid=g&branch_id=0&op=try&rid=00ff00ff00ff00ff", "", success).body,
            R"({"dtm_result":"SUCCESS","rid":"00ff00ff00ff00ff"})");
  EXPECT_EQ(handle_http("/t?gid=g&branch_id=0&op=try", "", success).body, R"({"dtm_result":"SUCCESS"})");
  EXPECT_EQ(handle_http("/t?gid=g&branch_id=0&op=try&rid=a%22%7D", "", success).body, R"({"dtm_result":"SUCCESS"})")
      << "a rid that is not a plain token is not echoed";
}

// A call's answer is wanted by its BranchContext's deadline: the call is cut
// there (unknown) even when the participant's own timeout is longer, against
// a host gone from the network (SYNs dropped) and a slow answer alike; a
// deadline already passed sends nothing.
TEST_F(TxHttp, ACallEndsByItsDeadlineNotItsTimeout) {
  test::TcpFault gone;
  gone.stall();
  HttpParticipant to_gone;
  to_gone.try_url = to_gone.confirm_url = to_gone.cancel_url =
      "http://127.0.0.1:" + std::to_string(gone.port()) + "/tcc";
  to_gone.timeout = 3000ms;
  Participant p = http_participant(to_gone).value();
  auto took = [](const Participant& calls, BranchContext ctx, milliseconds within) {
    ctx.deadline = std::chrono::steady_clock::now() + within;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW((void)calls.try_(ctx), std::runtime_error);
    return std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
  };
  auto t = took(p, {"t1", 0, Op::try_, "5"}, 300ms);
  EXPECT_GE(t, 250ms);
  EXPECT_LT(t, 1200ms) << "a connect that hangs held the call past its deadline";

  Participant slow = http_participant(alice_http.endpoints(3000ms)).value();
  alice_http.slow_ms = 1500;
  alice_http.slow_tries = 1;
  t = took(slow, {"t2", 0, Op::try_, "5"}, 300ms);
  EXPECT_GE(t, 250ms);
  EXPECT_LT(t, 1200ms) << "a slow answer held the call past its deadline";
  EXPECT_EQ(slow.cancel({"t2", 0, Op::cancel, "5"}), Outcome::success);

  const int before = alice_http.requests();
  t = took(slow, {"t3", 0, Op::try_, "5"}, -1ms);
  EXPECT_LT(t, 100ms);
  EXPECT_EQ(alice_http.requests(), before) << "a call past its deadline was sent";
  expect_settled();
}

// The verifier's checks over random faults on every call of both
// services: delayed past the caller's timeout (so a Cancel may overtake
// its Try), refused, acted on with the answer lost, delivered twice. After
// recovery, whatever happened: every transaction finished; in each bank's
// barrier a committed one has its Confirm and no Cancel, an aborted one no
// Confirm; the money is exact and nothing is left frozen or in flight.
TEST_F(TxHttp, RandomFaultsOnEveryCallNeverBreakAtomicity) {
  BankService::Chaos chaos;
  chaos.late = 15;
  chaos.refuse = 10;
  chaos.drop = 10;
  chaos.twice = 10;
  chaos.late_ms = 250;
  run_under(chaos);
}

// The same checks with wrong bytes around right answers on every call of
// both services: a 103 before the answer, the answer written twice (in one
// write, or its copy 20 ms later), junk after it, and some answers lost.
// Alice's 100 pays 20 of the 60 transfers: the rest are refused by her
// Try, and none of those may commit.
TEST_F(TxHttp, RandomWrongBytesOnTheWireNeverBreakAtomicity) {
  BankService::Chaos chaos;
  chaos.drop = 5;
  chaos.interim = 15;
  chaos.doubled = 15;
  chaos.doubled_late = 15;
  chaos.garble = 10;
  run_under(chaos);
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

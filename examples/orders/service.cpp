// order-service: one of the order demo's three TCC participants (stock,
// payment, order), an HTTP service with its own SQLite database, called by
// the coordinator as DTM calls a participant (POST /try, /confirm, /cancel;
// see dlock/tx.hpp). Each call runs in one local transaction behind
// tx::sqlite_barrier, so duplicates, a Cancel before its Try and a Try after
// its Cancel are harmless.
//
//   stock, payment: the payload is an amount. Try moves it from `available`
//     to `frozen` (failure when not enough is available), Confirm from
//     `frozen` to `done`, Cancel back to `available`.
//   order: the payload is the order id. Try inserts it as 'pending',
//     Confirm makes it 'paid', Cancel 'cancelled'.
//
// The database's tables are made by the experiment. Faults for the
// verifier, each a percent chance per call from a seeded generator: --late
// (acted on only after 300 ms, past the caller's timeout: a Cancel may
// overtake its Try), --twice (acted on twice), --drop (acted on, answer
// lost); and wrong bytes around a right answer on the wire: --interim (a
// 103 Early Hints before it), --double (the answer written twice), --garble
// (junk written after it). --think-ms holds the local transaction open that
// long (a kill then lands inside it).
//
//   order-service --role stock|payment|order --db PATH --port P
//                 [--think-ms N] [--seed S] [--late P] [--twice P] [--drop P]
//                 [--interim P] [--double P] [--garble P]
#include <signal.h>
#include <sqlite3.h>

#include <chrono>
#include <cstring>
#include <dlock/tx.hpp>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/http_service.hpp"

namespace tx = dlock::tx;
using dlock::tools::HttpAnswer;

namespace {

struct Config {
  std::string role, db;
  int port = 0, think_ms = 0;
  unsigned seed = 1;
  int late = 0, twice = 0, drop = 0;
  int interim = 0, doubled = 0, garble = 0;
};

// One statement with up to two parameters; the rows it changed, -1 on error.
int exec(sqlite3* db, const char* sql, const std::string& a, const std::string& b = {}) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) return -1;
  sqlite3_bind_text(st, 1, a.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_bind_parameter_count(st) > 1) sqlite3_bind_text(st, 2, b.c_str(), -1, SQLITE_TRANSIENT);
  const int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? sqlite3_changes(db) : -1;
}

// The local work of one call, inside the barrier's transaction.
tx::Outcome work(const Config& cfg, sqlite3* db, const tx::BranchContext& c) {
  if (cfg.think_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(cfg.think_ms));
  int n = -1;
  if (cfg.role == "order") {
    if (c.op == tx::Op::try_)
      n = exec(db, "INSERT INTO orders (id, status) VALUES (?1, 'pending')", c.payload);
    else
      n = exec(db, "UPDATE orders SET status = ?2 WHERE id = ?1", c.payload,
               c.op == tx::Op::confirm ? "paid" : "cancelled");
    return n == 1 ? tx::Outcome::success : tx::Outcome::unknown;
  }
  switch (c.op) {
    case tx::Op::try_:
      n = exec(db,
               "UPDATE ledger SET available = available - ?1, frozen = frozen + ?1 WHERE name = ?2 AND available >= ?1",
               c.payload, cfg.role);
      if (n == 0) return tx::Outcome::failure;  // not enough: the order cannot be
      break;
    case tx::Op::confirm:
      n = exec(db, "UPDATE ledger SET frozen = frozen - ?1, done = done + ?1 WHERE name = ?2", c.payload, cfg.role);
      break;
    case tx::Op::cancel:
      n = exec(db, "UPDATE ledger SET frozen = frozen - ?1, available = available + ?1 WHERE name = ?2", c.payload,
               cfg.role);
      break;
  }
  return n == 1 ? tx::Outcome::success : tx::Outcome::unknown;
}

class Service {
 public:
  explicit Service(Config cfg) : cfg_(std::move(cfg)), rng_(cfg_.seed) {}

  std::optional<HttpAnswer> answer(const std::string& target, const std::string& body) {
    if (roll(cfg_.late)) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto reply = act(target, body);
    if (roll(cfg_.twice)) reply = act(target, body);
    if (roll(cfg_.drop)) return std::nullopt;
    if (roll(cfg_.interim)) reply.interim = "HTTP/1.1 103 Early Hints\r\nLink: </orders.css>; rel=preload\r\n\r\n";
    if (roll(cfg_.doubled)) reply.twice = true;
    if (roll(cfg_.garble)) reply.trailing_garbage = std::string("\0\x17garbled\r\n\r\n", 13);
    return reply;
  }

 private:
  bool roll(int percent) {
    if (percent <= 0) return false;
    std::lock_guard lock(mu_);
    return std::uniform_int_distribution<int>(0, 99)(rng_) < percent;
  }

  HttpAnswer act(const std::string& target, const std::string& body) {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(cfg_.db.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      sqlite3_close(db);
      return {500, "cannot open the database"};
    }
    sqlite3_busy_timeout(db, 5000);
    tx::HttpReply reply = tx::handle_http(target, body, [&](const tx::BranchContext& c) {
      return tx::sqlite_barrier(db, c, [&](sqlite3* conn) { return work(cfg_, conn, c); });
    });
    sqlite3_close(db);
    return {reply.status, reply.body};
  }

  Config cfg_;
  std::mutex mu_;
  std::mt19937 rng_;  // under mu_
};

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--role")
      cfg.role = value;
    else if (flag == "--db")
      cfg.db = value;
    else if (flag == "--port")
      cfg.port = std::stoi(value);
    else if (flag == "--think-ms")
      cfg.think_ms = std::stoi(value);
    else if (flag == "--seed")
      cfg.seed = static_cast<unsigned>(std::stoul(value));
    else if (flag == "--late")
      cfg.late = std::stoi(value);
    else if (flag == "--twice")
      cfg.twice = std::stoi(value);
    else if (flag == "--drop")
      cfg.drop = std::stoi(value);
    else if (flag == "--interim")
      cfg.interim = std::stoi(value);
    else if (flag == "--double")
      cfg.doubled = std::stoi(value);
    else if (flag == "--garble")
      cfg.garble = std::stoi(value);
    else
      cfg.role.clear();
  }
  if ((cfg.role != "stock" && cfg.role != "payment" && cfg.role != "order") || cfg.db.empty()) {
    std::cerr << "usage: order-service --role stock|payment|order --db PATH --port P [--think-ms N] [--seed S] "
                 "[--late P] [--twice P] [--drop P] [--interim P] [--double P] [--garble P]\n";
    return 64;
  }
  try {
    sigset_t set;  // blocked before any thread starts: only sigwait takes them
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    Service service(cfg);
    dlock::tools::HttpService http(
        [&](const std::string& target, const std::string& body) { return service.answer(target, body); }, cfg.port);
    std::cout << "listening " << http.port() << std::endl;
    int sig = 0;
    sigwait(&set, &sig);  // until stopped; HttpService's destructor ends every call
  } catch (const std::exception& e) {
    std::cerr << "order-service: " << e.what() << '\n';
    return 1;
  }
}

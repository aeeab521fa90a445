// order-experiment: seed 004's story as a run with faults. An order spans
// three services, each with its own database (stock, payment, order); N
// concurrent orders run as TCC transactions (order-service processes over
// HTTP, SQLite each, the coordinator's log on SQLite) and as 2PC
// transactions (three PostgreSQL databases, the log on PostgreSQL), while
// the experiment kills the coordinator, pauses it past its claim (a second
// coordinator takes over), and kills participants, at random points, and
// restarts them; and, as a hostile network or a sloppy participant would,
// puts wrong bytes on the wire (interim 103s, answers written twice, junk
// after an answer), drops SYNs to a participant, freezes a participant
// database mid-statement, loses the log's answer after its write ran, and
// has some 2PC orders take their rows in the opposite order. Then it checks
// the outcome: every order committed or cancelled (none in doubt), all
// three branches of an order confirmed or none, stock and money conserved
// to the unit, no prepared transaction left, what each run() told its
// caller agreeing with the log, and every run() within its bound; and it
// prints a table per protocol with the time to recover from each
// coordinator kill. Last, the naive coordinator the seed warns about
// (TCC with its decision only in memory, each call made once) under the
// same faults: its orders are left torn or frozen.
//
// Exit status: 0 when every check holds for TCC and 2PC (the naive one is
// expected to fail them); 1 otherwise; 2 on set-up failure.
//
//   order-experiment [--orders N] [--concurrency C] [--faults K] [--seed S]
//                    [--chaos P] [--protocol tcc|2pc|naive|all]
//                    [--reverse-every N]
//   order-experiment coordinate ...   (the coordinator process it starts)
#include <libpq-fe.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlock/tx.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/child_process.hpp"
#include "common/pg_cluster.hpp"
#include "common/tcp_proxy.hpp"
#include "coordinator.hpp"

namespace fs = std::filesystem;
namespace tx = dlock::tx;
using namespace std::chrono_literals;
using dlock::tools::Child;
using dlock::tools::stop_child;
using Clock = std::chrono::steady_clock;

namespace {

// SIGINT or SIGTERM: stop the faults, stop everything started, exit 130.
std::atomic<bool> g_interrupted{false};
void on_signal(int) { g_interrupted = true; }

struct Options {
  int orders = 200, concurrency = 4, faults = 8, chaos = 5;
  int reverse_every = 10;  // 2PC: every 10th order takes its rows in the opposite order
  unsigned seed = 1;
  std::string protocol = "all";
};

struct Ledger {
  long long available = 0, frozen = 0, done = 0;
};

struct Outcome {
  std::string protocol;
  int committed = 0, cancelled = 0, in_doubt = 0, never_logged = 0;
  long long stock_start = 0, money_start = 0;
  Ledger stock, money;
  int paid_orders = 0, torn = 0;  // torn: orders whose branches disagree
  int prepared_left = -1;         // 2PC only
  int coordinator_kills = 0, pauses = 0, participant_kills = 0, network_faults = 0, server_pauses = 0;
  int statement_freezes = 0, log_answers_lost = 0, syn_drops = 0;  // the protocol faults
  int told = 0, told_in_doubt = 0, told_wrong = 0;                 // run()'s answers, and those the log contradicts
  int overruns = 0;                                                // run() calls past their bound
  long long worst_ms = 0, worst_over_ms = 0;                       // the slowest call, and its time past the bound
  std::vector<long long> recovery_ms;
  double seconds = 0;
  std::vector<std::string> problems;
};

// ---- the participants' databases -------------------------------------------

const char* kSchema =
    "CREATE TABLE ledger (name TEXT PRIMARY KEY, available BIGINT NOT NULL, frozen BIGINT NOT NULL, done BIGINT "
    "NOT NULL);"
    "CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL);"
    "CREATE TABLE moves (gid TEXT PRIMARY KEY);";

void sqlite_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  char* err = nullptr;
  const bool ok = sqlite3_open(path.c_str(), &db) == SQLITE_OK &&
                  sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) == SQLITE_OK;
  const std::string why = err ? err : sqlite3_errmsg(db);
  sqlite3_free(err);
  sqlite3_close(db);
  if (!ok) throw std::runtime_error(path + ": " + why);
}

// Rows of a query, each as its columns' text.
std::vector<std::vector<std::string>> sqlite_rows(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_stmt* st = nullptr;
  std::vector<std::vector<std::string>> rows;
  // A service may be writing (WAL lets readers in, but a checkpoint or the
  // first open can hold the file a moment): wait for it as the services do.
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK &&
      sqlite3_busy_timeout(db, 5000) == SQLITE_OK &&
      sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      rows.emplace_back();
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        const auto* text = sqlite3_column_text(st, i);
        rows.back().emplace_back(text ? reinterpret_cast<const char*>(text) : "");
      }
    }
  }
  const std::string why = sqlite3_errmsg(db);
  const bool failed = st == nullptr;
  sqlite3_finalize(st);
  sqlite3_close(db);
  if (failed) throw std::runtime_error(path + ": " + why);
  return rows;
}

std::vector<std::vector<std::string>> pg_rows(const std::string& url, const std::string& sql) {
  PGconn* conn = PQconnectdb(url.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    const std::string why = PQerrorMessage(conn);
    PQfinish(conn);
    throw std::runtime_error(why);
  }
  PGresult* r = PQexec(conn, sql.c_str());
  const auto status = PQresultStatus(r);
  std::vector<std::vector<std::string>> rows;
  if (status == PGRES_TUPLES_OK)
    for (int i = 0; i < PQntuples(r); ++i) {
      rows.emplace_back();
      for (int j = 0; j < PQnfields(r); ++j) rows.back().emplace_back(PQgetvalue(r, i, j));
    }
  const std::string why = PQerrorMessage(conn);
  PQclear(r);
  PQfinish(conn);
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) throw std::runtime_error(why);
  return rows;
}

Ledger ledger_of(const std::vector<std::vector<std::string>>& rows) {
  if (rows.size() != 1) throw std::runtime_error("the ledger row is missing");
  return {std::stoll(rows[0][0]), std::stoll(rows[0][1]), std::stoll(rows[0][2])};
}

std::string with_database(const std::string& url, const std::string& db) {
  return url.substr(0, url.rfind('/') + 1) + db;
}

// postgres://user@127.0.0.1:PORT/db with another port.
std::string via_proxy(const std::string& url, int port) {
  const auto slash = url.rfind('/');
  return url.substr(0, url.rfind(':', slash) + 1) + std::to_string(port) + url.substr(slash);
}

// ---- one protocol's run ------------------------------------------------------

class Run {
 public:
  Run(const Options& opt, std::string protocol, fs::path dir, std::string self, std::string pg_url, fs::path pg_dir)
      : opt_(opt),
        dir_(std::move(dir)),
        pg_dir_(std::move(pg_dir)),
        self_(std::move(self)),
        pg_url_(std::move(pg_url)),
        rng_(opt.seed) {
    out_.protocol = std::move(protocol);
    out_.stock_start = opt.orders * 2 / 3;                         // some orders find no stock
    out_.money_start = 1LL * orders::kPrice * opt.orders * 3 / 4;  // some find no money
  }
  ~Run() {
    stop_child(helper_);
    stop_child(coordinator_);
    for (auto& s : services_) stop_child(s);
  }

  Outcome go() {
    set_up();
    const auto t0 = Clock::now();
    coordinator_ = start_coordinator(false);
    if (!naive()) {
      helper_ = start_coordinator(true);
      auto c = tx::Coordinator::open(log_url_);  // the experiment's own view of the log
      if (!c.ok()) throw std::runtime_error(c.status().message());
      view_.emplace(std::move(*c));
    }
    int faults = 0;
    const auto deadline = t0 + 180s;
    for (;;) {
      int code = 0;
      if (dlock::tools::child_exited(coordinator_, &code)) {
        if (code != 0) out_.problems.push_back("the coordinator exited with " + std::to_string(code));
        break;
      }
      if (g_interrupted) {
        out_.problems.push_back("interrupted");
        break;
      }
      if (Clock::now() > deadline) {
        out_.problems.push_back("the coordinator did not finish within 180 s");
        break;
      }
      if (faults >= opt_.faults) {
        std::this_thread::sleep_for(20ms);
        continue;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(100, 400)(rng_)));
      if (!dlock::tools::child_running(coordinator_)) continue;  // its status is read above
      ++faults;
      switch (std::uniform_int_distribution<int>(0, 4)(rng_)) {
        case 0:
          kill_coordinator();
          break;
        case 1:
          pause_coordinator();
          break;
        case 2:
          kill_participant(std::uniform_int_distribution<int>(0, 2)(rng_));
          break;
        case 3:
          network_fault();
          break;
        default:
          protocol_fault();
          break;
      }
    }
    out_.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    // Nothing else may have died on its own (a crash, a sanitizer's report).
    int code = 0;
    if (!naive() && dlock::tools::child_exited(helper_, &code))
      out_.problems.push_back("the recovering coordinator exited with " + std::to_string(code));
    for (std::size_t i = 0; i < services_.size(); ++i)
      if (dlock::tools::child_exited(services_[i], &code))
        out_.problems.push_back("the " + orders::kRoles[i] + " service exited with " + std::to_string(code));
    stop_child(helper_);
    for (auto& s : services_) stop_child(s);
    if (!g_interrupted) check();
    return out_;
  }

 private:
  bool naive() const { return out_.protocol == "naive"; }
  bool http() const { return out_.protocol != "2pc"; }  // participants are services
  std::string db_path(int i) const { return (dir_ / (orders::kRoles[i] + ".db")).string(); }
  std::string pg_db(int i) const { return with_database(pg_url_, "db_" + out_.protocol + "_" + orders::kRoles[i]); }

  void set_up() {
    fs::create_directories(dir_);
    const long long start[] = {out_.stock_start, out_.money_start, 0};
    for (int i = 0; i < 3; ++i) {
      const std::string row =
          "INSERT INTO ledger VALUES ('" + orders::kRoles[i] + "', " + std::to_string(start[i]) + ", 0, 0);";
      if (http()) {
        sqlite_exec(db_path(i), std::string("PRAGMA journal_mode = WAL;") + kSchema + row);
        ports_.push_back(dlock::tools::free_port());
        services_.push_back(start_service(i));
      } else {
        pg_rows(pg_url_, "CREATE DATABASE db_" + out_.protocol + "_" + orders::kRoles[i]);
        pg_rows(pg_db(i), kSchema + row);
      }
    }
    // The coordinators reach every participant (and a PostgreSQL log)
    // through the verifier's proxy, one link each, for the network faults.
    const int upstream = http() ? 0 : std::stoi(pg_url_.substr(pg_url_.rfind(':') + 1));
    auto proxy_to = [&](int port, const std::string& name) {
      auto& proxy = proxies_.emplace_back(std::make_unique<dlock::tools::Proxy>("127.0.0.1", port));
      const int link = proxy->add_link(name);
      proxy->start();
      return link;
    };
    for (int i = 0; i < 3; ++i) links_.push_back(proxy_to(http() ? ports_[i] : upstream, orders::kRoles[i]));
    log_url_ = http() ? "sqlite://" + (dir_ / "tx.db").string() : with_database(pg_url_, "postgres");
    if (!http()) log_link_ = proxy_to(upstream, "log");
  }

  Child start_service(int i) {
    Child s = dlock::tools::start_child({self_dir() + "/order-service",
                                         "--role",
                                         orders::kRoles[i],
                                         "--db",
                                         db_path(i),
                                         "--port",
                                         std::to_string(ports_[i]),
                                         "--think-ms",
                                         "2",
                                         "--seed",
                                         std::to_string(opt_.seed + 17 * i + restarts_++),
                                         "--late",
                                         std::to_string(opt_.chaos),
                                         "--twice",
                                         std::to_string(opt_.chaos),
                                         "--drop",
                                         std::to_string(opt_.chaos),
                                         "--interim",
                                         std::to_string(opt_.chaos),
                                         "--double",
                                         std::to_string(opt_.chaos),
                                         "--garble",
                                         std::to_string(opt_.chaos)},
                                        true, (dir_ / (orders::kRoles[i] + ".log")).string());
    dlock::tools::read_listening_port(s.out_fd);
    return s;
  }

  Child start_coordinator(bool recover_only) {
    const std::string log = http() ? log_url_ : via_proxy(log_url_, log_link_);
    std::vector<std::string> argv = {self_,           "coordinate",
                                     "--protocol",    out_.protocol,
                                     "--log",         log,
                                     "--orders",      std::to_string(opt_.orders),
                                     "--concurrency", std::to_string(opt_.concurrency)};
    if (recover_only) argv.push_back("--recover-only");
    if (!recover_only) {
      argv.push_back("--told");
      argv.push_back((dir_ / "told.txt").string());
      if (!http()) {
        argv.push_back("--reverse-every");
        argv.push_back(std::to_string(opt_.reverse_every));
      }
    }
    if (naive()) {
      argv.push_back("--first");
      argv.push_back(std::to_string(next_naive_order()));
    }
    for (int i = 0; i < 3; ++i) {
      argv.push_back("--participant");
      argv.push_back(orders::kRoles[i] + "=" +
                     (http() ? "http://127.0.0.1:" + std::to_string(links_[i]) : via_proxy(pg_db(i), links_[i])));
    }
    return dlock::tools::start_child(argv, false, (dir_ / "coordinator.log").string());
  }

  std::string self_dir() const { return fs::path(self_).parent_path().string(); }

  // Where a restarted naive coordinator goes on: after the last order the
  // order service has seen (it has no log of its own).
  int next_naive_order() const {
    int next = 0;
    for (auto& r : sqlite_rows(db_path(2), "SELECT id FROM orders"))
      next = std::max(next, std::stoi(r[0].substr(r[0].rfind('-') + 1)) + 1);
    return next;
  }

  // SIGKILL, restart, and time until every transaction it left unfinished
  // is finished (by the restarted one or the helper, once the claims lapse).
  void kill_coordinator() {
    const auto t0 = Clock::now();
    dlock::tools::kill_child(coordinator_);
    ++out_.coordinator_kills;
    std::this_thread::sleep_for(100ms);
    if (naive()) {
      coordinator_ = start_coordinator(false);
      return;
    }
    auto left = view_->list_unfinished(1000);
    coordinator_ = start_coordinator(false);
    if (!left.ok()) return;
    for (const auto& t : *left) {
      while (Clock::now() - t0 < 60s && !g_interrupted) {
        auto now = view_->show(t.gid);
        if (now.ok() && tx::finished(now->state)) break;
        std::this_thread::sleep_for(20ms);
      }
    }
    out_.recovery_ms.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());
  }

  // Stopped past its claim: the helper takes its transactions over; once
  // resumed, its stale writes must change nothing.
  void pause_coordinator() {
    const auto t0 = Clock::now();
    kill(coordinator_.pid, SIGSTOP);
    std::this_thread::sleep_for(orders::kClaimLease * 5 / 2);
    kill(coordinator_.pid, SIGCONT);
    stalls_.emplace_back(t0, Clock::now());
    ++out_.pauses;
  }

  // TCC: the service's process, SIGKILLed (maybe inside a local
  // transaction) and restarted on its port. 2PC: the database's server
  // processes serving the coordinator, terminated mid-call; or, half the
  // time, the whole server paused.
  void kill_participant(int i) {
    if (http()) {
      ++out_.participant_kills;
      dlock::tools::kill_child(services_[i]);
      std::this_thread::sleep_for(200ms);
      services_[i] = start_service(i);
    } else if (std::uniform_int_distribution<int>(0, 1)(rng_) == 0) {
      ++out_.participant_kills;
      pg_rows(pg_url_, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'db_" + out_.protocol +
                           "_" + orders::kRoles[i] + "' AND pid <> pg_backend_pid()");
    } else {
      pause_database();
    }
  }

  // 2PC: every process of the PostgreSQL cluster (participants and log
  // alike) stopped past the claims' lease, then resumed: a server that
  // stalls (swapping, a VM paused) rather than fails.
  void pause_database() {
    ++out_.server_pauses;
    std::ifstream pid_file(pg_dir_ / "data" / "postmaster.pid");
    pid_t postmaster = 0;
    if (!(pid_file >> postmaster) || postmaster <= 0) return;
    std::vector<pid_t> pids = {postmaster};
    for (const auto& entry : fs::directory_iterator("/proc")) {
      std::ifstream stat(entry.path() / "stat");
      std::string line;
      if (!std::getline(stat, line) || line.rfind(')') == std::string::npos) continue;
      std::istringstream rest(line.substr(line.rfind(')') + 2));
      char state;
      pid_t parent = 0;
      if (rest >> state >> parent && parent == postmaster) pids.push_back(std::stoi(entry.path().filename()));
    }
    const auto t0 = Clock::now();
    for (pid_t pid : pids) kill(pid, SIGSTOP);
    std::this_thread::sleep_for(orders::kClaimLease * 3 / 2);
    for (pid_t pid : pids) kill(pid, SIGCONT);
    stalls_.emplace_back(t0, Clock::now());  // the log's writes wait for it
  }

  // The faults of a hostile protocol peer rather than a crash. TCC: a
  // participant's listener drops SYNs (the host gone from the network).
  // 2PC: one participant database frozen with the branches' statements in
  // flight (its sessions SIGSTOPped, the log's server left running), or the
  // log's answers lost after its statements ran (a decision written, its
  // answer gone), briefly or past finish_within. The participants' own
  // wrong bytes (an interim 103, an answer written twice, junk after it)
  // come from the services (--interim, --double, --garble). Every run()
  // must still return in time and tell what the log ends with.
  void protocol_fault() {
    if (http()) {
      ++out_.syn_drops;
      const std::size_t i = std::uniform_int_distribution<std::size_t>(0, 2)(rng_);
      proxies_[i]->unreachable("", true);
      std::this_thread::sleep_for(1200ms);
      proxies_[i]->unreachable("", false);
      return;
    }
    if (std::uniform_int_distribution<int>(0, 1)(rng_) == 0) {
      freeze_database(std::uniform_int_distribution<int>(0, 1)(rng_));
      return;
    }
    ++out_.log_answers_lost;
    proxies_.back()->drop_replies("", true);  // the log's proxy
    std::this_thread::sleep_for(std::uniform_int_distribution<int>(0, 1)(rng_) == 0 ? 300ms : 1500ms);
    proxies_.back()->drop_replies("", false);
  }

  // Every session of participant database `i` stopped for longer than the
  // Try phase, then resumed.
  void freeze_database(int i) {
    ++out_.statement_freezes;
    std::vector<pid_t> pids;
    for (const auto& r : pg_rows(pg_url_, "SELECT pid FROM pg_stat_activity WHERE datname = 'db_" + out_.protocol +
                                              "_" + orders::kRoles[i] + "'"))
      pids.push_back(std::stoi(r[0]));
    for (pid_t pid : pids) kill(pid, SIGSTOP);
    std::this_thread::sleep_for(2500ms);
    for (pid_t pid : pids) kill(pid, SIGCONT);
  }

  // One fault on one link of the proxy (a participant's, or the log's):
  // calls delayed past their timeout, answers lost with the connection
  // reset, connections reset, or a partition that heals.
  void network_fault() {
    ++out_.network_faults;
    auto& proxy = *proxies_[std::uniform_int_distribution<std::size_t>(0, proxies_.size() - 1)(rng_)];
    switch (std::uniform_int_distribution<int>(0, 3)(rng_)) {
      case 0:
        proxy.set_delay("", 300ms);
        std::this_thread::sleep_for(1s);
        proxy.set_delay("", 0ms);
        break;
      case 1:
        proxy.drop_replies("", true);
        std::this_thread::sleep_for(300ms);
        proxy.drop_replies("", false);
        break;
      case 2:
        proxy.reset("");
        break;
      default:
        proxy.blackhole("", true);
        std::this_thread::sleep_for(800ms);
        proxy.blackhole("", false);
        break;
    }
  }

  // ---- the checks -----------------------------------------------------------

  void check() {
    // What each participant did, per order: with HTTP from its barrier
    // (try, confirm, cancel rows), with 2PC from the moves its committed
    // work left.
    std::vector<std::set<std::string>> tried(3), confirmed(3), cancelled(3);
    for (int i = 0; i < 3; ++i) {
      auto rows = [&](const std::string& sql) {
        return http() ? sqlite_rows(db_path(i), sql) : pg_rows(pg_db(i), sql);
      };
      if (i < 2) (i == 0 ? out_.stock : out_.money) = ledger_of(rows("SELECT available, frozen, done FROM ledger"));
      if (i == 2) out_.paid_orders = std::stoi(rows("SELECT count(*) FROM orders WHERE status = 'paid'")[0][0]);
      if (http()) {  // the barrier's table is made by its first call
        if (!rows("SELECT 1 FROM sqlite_master WHERE name = 'dlock_tx_barrier'").empty())
          for (auto& r : rows("SELECT gid, op FROM dlock_tx_barrier"))
            (r[1] == "try" ? tried : r[1] == "confirm" ? confirmed : cancelled)[i].insert(r[0]);
      } else {
        for (auto& r : rows("SELECT gid FROM moves")) confirmed[i].insert(r[0]);
      }
    }
    for (int k = 0; k < opt_.orders; ++k) {
      const std::string gid = orders::gid_of(out_.protocol, k);
      int confirms = 0, open = 0, touched = 0;
      for (int i = 0; i < 3; ++i) {
        confirms += confirmed[i].count(gid) > 0;
        open += tried[i].count(gid) > 0 && !confirmed[i].count(gid) && !cancelled[i].count(gid);
        touched += tried[i].count(gid) > 0 || cancelled[i].count(gid) > 0;
      }
      std::optional<tx::State> state;  // the log's word; naive: the participants'
      if (view_) {
        if (auto t = view_->show(gid); t.ok()) state = t->state;
      } else if (confirms == 3) {
        state = tx::State::committed;
      } else if (confirms == 0 && open == 0 && touched > 0) {
        state = tx::State::aborted;
      } else if (touched > 0) {
        state = tx::State::trying;
      }
      if (!state)
        ++out_.never_logged;
      else if (*state == tx::State::committed)
        ++out_.committed;
      else if (*state == tx::State::aborted)
        ++out_.cancelled;
      else
        ++out_.in_doubt;
      // Atomicity: a committed order confirmed on all three participants and
      // cancelled on none; any other confirmed on none.
      const bool commit = state == tx::State::committed;
      bool torn = open > 0 || confirms != (commit ? 3 : 0);
      for (int i = 0; i < 3; ++i) torn |= commit && cancelled[i].count(gid) > 0;
      out_.torn += torn;
    }
    if (view_) check_told();
    if (out_.never_logged > 0) out_.problems.push_back(std::to_string(out_.never_logged) + " orders never ran");
    if (out_.in_doubt > 0) out_.problems.push_back(std::to_string(out_.in_doubt) + " orders in doubt");
    if (out_.torn > 0) out_.problems.push_back(std::to_string(out_.torn) + " orders with branches that disagree");

    auto conserved = [&](const char* what, long long start, const Ledger& l, long long per_order) {
      if (l.available + l.frozen + l.done != start || l.frozen != 0 || l.done != per_order * out_.committed)
        out_.problems.push_back(std::string(what) + " not conserved");
    };
    conserved("stock", out_.stock_start, out_.stock, 1);
    conserved("money", out_.money_start, out_.money, orders::kPrice);
    if (out_.paid_orders != out_.committed) out_.problems.push_back("paid orders differ from committed ones");
    if (!http()) {
      out_.prepared_left = std::stoi(pg_rows(pg_url_, "SELECT count(*) FROM pg_prepared_xacts")[0][0]);
      if (out_.prepared_left != 0) out_.problems.push_back("prepared transactions left");
    }
  }

  // What each run() told its caller against the log's final word: told
  // committed, the log must say committed; told aborted, aborted; told in
  // doubt, either; told any other error (no commit decided, none will be),
  // aborted or never logged (busy and invalid_argument ran nothing). And
  // each call within its bound, plus any stall of the coordinator or the
  // server it overlapped.
  void check_told() {
    std::ifstream in(dir_ / "told.txt");
    std::string gid, word;
    long long t0 = 0, t1 = 0;
    while (in >> gid >> word >> t0 >> t1) {
      ++out_.told;
      auto info = view_->show(gid);
      const std::string logged = info.ok() ? std::string(tx::to_string(info->state)) : "not logged";
      bool agrees = true;
      if (word == "committed")
        agrees = logged == "committed";
      else if (word == "aborted")
        agrees = logged == "aborted";
      else if (word == "in_doubt")
        ++out_.told_in_doubt;
      else if (word != "busy" && word != "invalid_argument")
        agrees = logged == "aborted" || logged == "not logged";
      if (!agrees) {
        ++out_.told_wrong;
        out_.problems.push_back(gid + ": run() told " + word + ", the log says " + logged);
      }
      const Clock::time_point start{Clock::duration(t0)}, end{Clock::duration(t1)};
      auto allowed = std::chrono::duration_cast<Clock::duration>(orders::kRunBound);
      for (const auto& [a, b] : stalls_)
        if (a < end && b > start) allowed += std::min(b, end) - std::max(a, start);
      const long long took = std::chrono::duration_cast<std::chrono::milliseconds>(end - start).count();
      const long long over = std::chrono::duration_cast<std::chrono::milliseconds>(end - start - allowed).count();
      out_.worst_ms = std::max(out_.worst_ms, took);
      if (out_.told == 1 || over > out_.worst_over_ms) out_.worst_over_ms = over;
      if (over > 0) {
        ++out_.overruns;
        out_.problems.push_back(gid + ": run() took " + std::to_string(took) + " ms, " + std::to_string(over) +
                                " ms past its bound");
      }
    }
  }

  const Options& opt_;
  fs::path dir_, pg_dir_;
  std::string self_, pg_url_, log_url_;
  std::mt19937 rng_;
  Outcome out_;
  std::vector<int> ports_;                                     // the services'
  std::vector<std::unique_ptr<dlock::tools::Proxy>> proxies_;  // one per participant, and the log's
  std::vector<int> links_;                                     // the coordinators' ports, per participant
  int log_link_ = 0;
  std::vector<Child> services_;
  Child coordinator_, helper_;
  std::optional<tx::Coordinator> view_;  // the log, as the experiment reads it (not naive)
  // When the coordinator or the whole database server was stopped by a
  // fault: a run() that overlaps one may take that much longer.
  std::vector<std::pair<Clock::time_point, Clock::time_point>> stalls_;
  int restarts_ = 0;
};

std::string recovery(const std::vector<long long>& ms) {
  if (ms.empty()) return "-";
  auto sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  return std::to_string(sorted[sorted.size() / 2]) + " / " + std::to_string(sorted.back());
}

// "coordinator killed 2, paused 1; participant killed 1; network 3; database paused 1"
std::string faults(const Outcome& o) {
  std::string text = "coordinator killed " + std::to_string(o.coordinator_kills) + ", paused " +
                     std::to_string(o.pauses) + "; participant killed " + std::to_string(o.participant_kills) +
                     "; network " + std::to_string(o.network_faults);
  if (o.protocol == "2pc")
    text += "; database paused " + std::to_string(o.server_pauses) + "; participant frozen mid-statement " +
            std::to_string(o.statement_freezes) + "; log answers lost " + std::to_string(o.log_answers_lost);
  if (o.protocol == "tcc") text += "; SYNs dropped " + std::to_string(o.syn_drops);
  return text;
}

// "412 told, 3 in doubt, 0 contradicted by the log"
std::string told(const Outcome& o) {
  if (o.protocol == "naive") return "-";
  return std::to_string(o.told) + " told, " + std::to_string(o.told_in_doubt) + " in doubt, " +
         std::to_string(o.told_wrong) + " contradicted by the log";
}

// "0 (slowest 6120 ms, 880 ms within its bound)"
std::string bounds(const Outcome& o) {
  if (o.protocol == "naive" || o.told == 0) return "-";
  const std::string margin = o.worst_over_ms > 0 ? std::to_string(o.worst_over_ms) + " ms past"
                                                 : std::to_string(-o.worst_over_ms) + " ms within";
  return std::to_string(o.overruns) + " (slowest " + std::to_string(o.worst_ms) + " ms; closest " + margin + ")";
}

std::string verdict(const Outcome& o) {
  if (o.protocol != "naive") return o.problems.empty() ? "ok" : "FAILED";
  return o.problems.empty() ? "not caught (no fault hit an order in flight)" : "caught, as the seed warns";
}

void print(const std::vector<Outcome>& outs, const Options& opt) {
  std::printf(
      "| protocol | orders | committed | cancelled | in doubt | stock: start = left + sold | money: start = left + "
      "paid "
      "| branches disagree | prepared left | faults | recovery after a coordinator kill, median / max ms | run()'s "
      "answers | run() calls past their bound | seconds | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
      "---|---|---|\n");
  for (const auto& o : outs) {
    const char* name = o.protocol == "tcc"   ? "TCC (HTTP, SQLite)"
                       : o.protocol == "2pc" ? "2PC (PostgreSQL)"
                                             : "naive TCC, no log";
    const std::string prepared = o.prepared_left < 0 ? "-" : std::to_string(o.prepared_left);
    std::printf(
        "| %s | %d | %d | %d | %d | %lld = %lld + %lld | %lld = %lld + %lld | %d | %s | %s | %s | %s | %s | %.1f | %s "
        "|\n",
        name, opt.orders, o.committed, o.cancelled, o.in_doubt, o.stock_start, o.stock.available + o.stock.frozen,
        o.stock.done, o.money_start, o.money.available + o.money.frozen, o.money.done, o.torn, prepared.c_str(),
        faults(o).c_str(), recovery(o.recovery_ms).c_str(), told(o).c_str(), bounds(o).c_str(), o.seconds,
        verdict(o).c_str());
  }
  for (const auto& o : outs)
    for (const auto& p : o.problems) std::printf("  %s: %s\n", o.protocol.c_str(), p.c_str());
}

int coordinate(int argc, char** argv) {
  orders::CoordinatorArgs a;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--recover-only") {
      a.recover_only = true;
      continue;
    }
    if (i + 1 >= argc) return 64;
    const std::string value = argv[++i];
    if (flag == "--protocol")
      a.protocol = value;
    else if (flag == "--log")
      a.log = value;
    else if (flag == "--orders")
      a.orders = std::stoi(value);
    else if (flag == "--concurrency")
      a.concurrency = std::stoi(value);
    else if (flag == "--first")
      a.first = std::stoi(value);
    else if (flag == "--told")
      a.told = value;
    else if (flag == "--reverse-every")
      a.reverse_every = std::stoi(value);
    else if (flag == "--participant")
      a.participants[value.substr(0, value.find('='))] = value.substr(value.find('=') + 1);
    else
      return 64;
  }
  return orders::run_coordinator(a);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "coordinate") return coordinate(argc, argv);
  Options opt;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--orders")
      opt.orders = std::stoi(value);
    else if (flag == "--concurrency")
      opt.concurrency = std::stoi(value);
    else if (flag == "--faults")
      opt.faults = std::stoi(value);
    else if (flag == "--seed")
      opt.seed = static_cast<unsigned>(std::stoul(value));
    else if (flag == "--chaos")
      opt.chaos = std::stoi(value);
    else if (flag == "--protocol")
      opt.protocol = value;
    else if (flag == "--reverse-every")
      opt.reverse_every = std::stoi(value);
    else {
      std::cerr << "usage: order-experiment [--orders N] [--concurrency C] [--faults K] [--seed S] [--chaos P] "
                   "[--protocol tcc|2pc|naive|all] [--reverse-every N]\n";
      return 64;
    }
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const std::string self = fs::canonical("/proc/self/exe").string();
  char tmpl[] = "/tmp/dlock-orders-XXXXXX";
  if (!mkdtemp(tmpl)) return 2;
  const fs::path tmp = tmpl;
  std::vector<Child> servers;
  std::vector<Outcome> outs;
  int rc = 0;
  try {
    std::string pg_url;
    if (opt.protocol == "all" || opt.protocol == "2pc") {
      pg_url = dlock::tools::start_postgres(tmp / "pg", servers);
      if (pg_url.empty()) throw std::runtime_error("PostgreSQL 15 is not installed (2PC needs it)");
      for (int i = 0;; ++i) try {  // listening is not yet accepting ("starting up")
          pg_rows(pg_url, "SELECT 1");
          break;
        } catch (const std::exception&) {
          if (i == 200) throw;
          std::this_thread::sleep_for(50ms);
        }
    }
    for (const std::string protocol : {"tcc", "2pc", "naive"}) {
      if ((opt.protocol != "all" && opt.protocol != protocol) || g_interrupted) continue;
      std::printf("running %d orders as %s, %d at a time, with %d faults...\n", opt.orders, protocol.c_str(),
                  opt.concurrency, opt.faults);
      std::fflush(stdout);
      outs.push_back(Run(opt, protocol, tmp / protocol, self, pg_url, tmp / "pg").go());
      if (!outs.back().problems.empty() && protocol != "naive") rc = 1;
    }
    std::printf("\n");
    if (!g_interrupted) print(outs, opt);
  } catch (const std::exception& e) {
    std::cerr << "order-experiment: " << e.what() << " (logs in " << tmp.string() << ")\n";
    dlock::tools::stop_postgres(tmp / "pg");
    for (auto& s : servers) stop_child(s);
    return 2;
  }
  dlock::tools::stop_postgres(tmp / "pg");
  for (auto& s : servers) stop_child(s);
  if (g_interrupted) {
    fs::remove_all(tmp);
    return 130;
  }
  if (rc == 0)
    fs::remove_all(tmp);
  else
    std::printf("logs kept in %s\n", tmp.c_str());
  return rc;
}

// dlock-tx-bench: distributed transactions on PostgreSQL beside the same
// work done without a coordinator, in one run.
//
//   limit   each participant's business statement in a local transaction
//           of its own (BEGIN; UPDATE; COMMIT), one participant after the
//           other: the work, without atomicity across them
//   tcc     dlock::tx TCC: the log on PostgreSQL, each participant's Try
//           and Confirm in its own local transaction behind pg_barrier
//   2pc     dlock::tx 2PC: the UPDATE prepared on each participant
//           (PREPARE TRANSACTION), the decision logged, COMMIT PREPARED
//   tcc-par, 2pc-par  the same with parallel_branches: each phase's calls
//           made at once
// with 2 and 3 participants (a database each, on one server) and each of
// --clients concurrent clients (threads, each on rows of its own: no
// contention). Transactions per second and p50/p99 latency per
// transaction; medians over the reps.
//
//   dlock-tx-bench --postgres URL [--seconds 3] [--reps 3] [--clients 1,4,16]
//                  [--protocols limit,tcc,tcc-par,2pc,2pc-par] [--load idle] [--json FILE]
// URL: a server where the user may create databases (dlock_txb_*, dropped
// and made again) and that takes prepared transactions.
#include <libpq-fe.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlock/tx.hpp>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

namespace {

namespace bench = dlock::bench;
using bench::Clock;

struct Args : bench::RunFlags {
  std::string postgres;
  std::string clients = "1,4,16";
  std::string protocols = "limit,tcc,tcc-par,2pc,2pc-par";  // the limit first: the others' ratios are to it
  std::string load = "idle";                                // a label for the results (the script makes the load)
};

constexpr int kMaxParticipants = 3;

// postgres://.../postgres?x -> postgres://.../<db>?x
std::string with_db(const std::string& url, const std::string& db) {
  const auto scheme = url.find("://");
  const auto slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  const auto query = url.find('?');
  const std::string head = slash == std::string::npos ? url.substr(0, query) : url.substr(0, slash);
  return head + "/" + db + (query == std::string::npos ? "" : url.substr(query));
}

PGconn* connect(const std::string& url) {
  PGconn* c = PQconnectdb(url.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    std::string e = PQerrorMessage(c);
    PQfinish(c);
    throw std::runtime_error("connecting to " + url.substr(0, url.find('@')) + "...: " + e);
  }
  return c;
}

void exec(PGconn* c, const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  const auto st = PQresultStatus(r);
  std::string e = PQresultErrorMessage(r);
  PQclear(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) throw std::runtime_error(sql + ": " + e);
}

// true when the statement ran and changed a row.
bool update(PGconn* c, const char* sql, const std::string& row) {
  const char* params[1] = {row.c_str()};
  PGresult* r = PQexecParams(c, sql, 1, nullptr, params, nullptr, nullptr, 0);
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK && std::string(PQcmdTuples(r)) == "1";
  PQclear(r);
  return ok;
}

std::string participant_db(int i) { return "dlock_txb_p" + std::to_string(i + 1); }

void make_databases(const std::string& url) {
  PGconn* admin = connect(url);
  exec(admin, "SET client_min_messages = warning");  // no NOTICE for a database not there yet
  for (int i = -1; i < kMaxParticipants; ++i) {
    const std::string db = i < 0 ? "dlock_txb_log" : participant_db(i);
    exec(admin, "DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
    exec(admin, "CREATE DATABASE " + db);
    if (i < 0) continue;
    PGconn* c = connect(with_db(url, db));
    exec(c, "CREATE TABLE acct (id int PRIMARY KEY, balance bigint NOT NULL, frozen bigint NOT NULL DEFAULT 0)");
    exec(c, "INSERT INTO acct (id, balance) SELECT g, 1000000000000 FROM generate_series(0, 255) g");
    PQfinish(c);
  }
  PGresult* r = PQexec(admin, "SHOW max_prepared_transactions");
  const int prepared = PQresultStatus(r) == PGRES_TUPLES_OK ? std::atoi(PQgetvalue(r, 0, 0)) : 0;
  PQclear(r);
  PQfinish(admin);
  if (prepared <= 0) throw std::runtime_error("the server takes no prepared transactions (max_prepared_transactions)");
}

// One client's connections to the participants, for the limit's loop.
struct Conns {
  explicit Conns(const std::string& url) {
    for (int i = 0; i < kMaxParticipants; ++i) c[i] = connect(with_db(url, participant_db(i)));
  }
  ~Conns() {
    for (auto* x : c) PQfinish(x);
  }
  PGconn* c[kMaxParticipants] = {};
};
thread_local Conns* tl_conns = nullptr;

// A participant's connections, shared by every thread that calls it: the
// clients' and, with parallel_branches, the coordinator's.
class ConnPool {
 public:
  explicit ConnPool(std::string url) : url_(std::move(url)) {}
  ~ConnPool() {
    for (auto* c : idle_) PQfinish(c);
  }
  PGconn* take() {
    {
      std::lock_guard lk(mu_);
      if (!idle_.empty()) {
        PGconn* c = idle_.back();
        idle_.pop_back();
        return c;
      }
    }
    return connect(url_);
  }
  void give(PGconn* c) {
    if (PQstatus(c) != CONNECTION_OK || PQtransactionStatus(c) != PQTRANS_IDLE) {
      PQfinish(c);
      return;
    }
    std::lock_guard lk(mu_);
    idle_.push_back(c);
  }

 private:
  std::string url_;
  std::mutex mu_;
  std::vector<PGconn*> idle_;
};
std::vector<std::unique_ptr<ConnPool>> participant_pools;

constexpr const char* kDebit = "UPDATE acct SET balance = balance - 1 WHERE id = $1";
constexpr const char* kTry = "UPDATE acct SET balance = balance - 1, frozen = frozen + 1 WHERE id = $1";
constexpr const char* kConfirm = "UPDATE acct SET frozen = frozen - 1 WHERE id = $1";
constexpr const char* kCancel = "UPDATE acct SET balance = balance + 1, frozen = frozen - 1 WHERE id = $1";

dlock::tx::Outcome barrier(int participant, const dlock::tx::BranchContext& ctx, const char* sql) {
  ConnPool& pool = *participant_pools[static_cast<std::size_t>(participant)];
  PGconn* conn = pool.take();
  const auto o = dlock::tx::pg_barrier(conn, ctx, [&](pg_conn* c) {
    return update(c, sql, ctx.payload) ? dlock::tx::Outcome::success : dlock::tx::Outcome::failure;
  });
  pool.give(conn);
  return o;
}

// True for a commit; anything else is told on stderr.
bool said(const dlock::Result<dlock::tx::State>& r) {
  if (!r.ok()) std::fprintf(stderr, "dlock-tx-bench: %s\n", r.status().to_string().c_str());
  return r.ok();
}

struct Row {
  std::string protocol;
  int participants = 0, clients = 0;
  double tx_per_s = 0, p50_us = 0, p99_us = 0;
  long failed = 0;
};

// Runs `one(client, i)` on `clients` threads for `seconds`; true = done.
Row measure(const std::string& url, const std::string& protocol, int participants, int clients, double seconds,
            const std::function<bool(int, long)>& one) {
  std::vector<std::vector<double>> lat(static_cast<std::size_t>(clients));
  std::atomic<long> failed{0};
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t)
    threads.emplace_back([&, t] {
      std::optional<Conns> conns;
      if (protocol == "limit") conns.emplace(url);
      tl_conns = conns ? &*conns : nullptr;
      while (!go) std::this_thread::yield();
      for (long i = 0; !stop; ++i) {
        const auto t0 = Clock::now();
        bool ok = false;
        try {
          ok = one(t, i);
        } catch (const std::exception& e) {  // a statement of the limit's loop failed
          std::fprintf(stderr, "dlock-tx-bench: %s\n", e.what());
        }
        if (!ok) ++failed;
        lat[static_cast<std::size_t>(t)].push_back(
            std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      }
      tl_conns = nullptr;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // connections made
  const auto t0 = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : threads) th.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  Row r{protocol, participants, clients};
  r.tx_per_s = static_cast<double>(all.size()) / elapsed;
  r.p50_us = bench::percentile(all, 0.50);
  r.p99_us = bench::percentile(std::move(all), 0.99);
  r.failed = failed;
  return r;
}

Row median_row(std::vector<Row> reps) {
  auto mid = [&](auto field) {
    std::vector<double> v;
    for (auto& r : reps) v.push_back(r.*field);
    return bench::median(std::move(v));
  };
  Row r = reps.front();
  r.tx_per_s = mid(&Row::tx_per_s);
  r.p50_us = mid(&Row::p50_us);
  r.p99_us = mid(&Row::p99_us);
  for (auto& x : reps) r.failed = std::max(r.failed, x.failed);
  return r;
}

// With DLOCK_BENCH_DEBUG set: where a transaction's time goes, as the mean
// time from one of the coordinator's steps to the next (the first from
// run()'s call), printed at the end.
struct StepTimes {
  std::mutex mu;
  std::map<std::string, std::pair<double, long>> by_step;  // total us, count
  static thread_local Clock::time_point last;
  void mark(std::string_view step) {
    const auto now = Clock::now();
    const double us = std::chrono::duration<double, std::micro>(now - last).count();
    last = now;
    std::lock_guard lk(mu);
    auto& [total, n] = by_step[std::string(step)];
    total += us;
    ++n;
  }
  void print() {
    std::lock_guard lk(mu);
    for (const auto& [step, t] : by_step)
      std::fprintf(stderr, "  until %-16s %8.0f us mean (%ld)\n", step.c_str(), t.first / static_cast<double>(t.second),
                   t.second);
  }
};
thread_local Clock::time_point StepTimes::last;
StepTimes step_times;
const bool kStepDebug = std::getenv("DLOCK_BENCH_DEBUG") != nullptr;

// The log and the participants: each one's Try, Confirm and Cancel behind
// pg_barrier (TCC), and its database (2PC). The step times are the
// sequential coordinator's (a parallel one's calls are on other threads).
dlock::tx::Coordinator open_coordinator(const std::string& url, bool parallel) {
  dlock::tx::CoordinatorOptions o;
  o.parallel_branches = parallel;
  if (kStepDebug && !parallel) o.on_step = [](std::string_view, std::string_view step) { step_times.mark(step); };
  auto coordinator = dlock::tx::Coordinator::open(with_db(url, "dlock_txb_log"), o);
  if (!coordinator.ok()) throw std::runtime_error("opening the log: " + coordinator.status().to_string());
  for (int p = 0; p < kMaxParticipants; ++p) {
    coordinator->add_participant("p" + std::to_string(p),
                                 {[p](const dlock::tx::BranchContext& c) { return barrier(p, c, kTry); },
                                  [p](const dlock::tx::BranchContext& c) { return barrier(p, c, kConfirm); },
                                  [p](const dlock::tx::BranchContext& c) { return barrier(p, c, kCancel); }});
    auto st = coordinator->add_database(participant_db(p), with_db(url, participant_db(p)));
    if (!st.ok()) throw std::runtime_error("add_database: " + st.to_string());
  }
  return std::move(coordinator.value());
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// One transaction of `protocol` for client `t`; true: committed.
using OneTx = std::function<bool(int t, long i)>;

OneTx one_of(const std::string& protocol, int participants, dlock::tx::Coordinator& seq, dlock::tx::Coordinator& par) {
  static std::atomic<long> serial{0};  // the gids: new ones for every transaction of the run
  auto row_of = [](int client) { return std::to_string(client); };
  if (protocol == "limit")
    return [=](int t, long) {
      for (int p = 0; p < participants; ++p) {
        PGconn* c = tl_conns->c[p];
        exec(c, "BEGIN");
        if (!update(c, kDebit, row_of(t))) {
          exec(c, "ROLLBACK");
          return false;
        }
        exec(c, "COMMIT");
      }
      return true;
    };
  dlock::tx::Coordinator* co = protocol.ends_with("-par") ? &par : &seq;
  if (protocol.starts_with("tcc"))
    return [=](int t, long) {
      std::vector<dlock::tx::Branch> b;
      for (int p = 0; p < participants; ++p) b.push_back({"p" + std::to_string(p), row_of(t)});
      StepTimes::last = Clock::now();
      auto r = co->run("tcc-" + std::to_string(serial++), b);
      if (kStepDebug) step_times.mark("(returned)");
      return said(r);
    };
  if (!protocol.starts_with("2pc")) throw std::runtime_error("no protocol '" + protocol + "'");
  return [=](int t, long) {
    std::vector<dlock::tx::XaBranch> b;
    const std::string row = row_of(t);
    for (int p = 0; p < participants; ++p)
      b.push_back({participant_db(p), [row](pg_conn* c) {
                     return update(c, kDebit, row) ? dlock::tx::Outcome::success : dlock::tx::Outcome::failure;
                   }});
    StepTimes::last = Clock::now();
    auto r = co->run_2pc("xa-" + std::to_string(serial++), b);
    if (kStepDebug) step_times.mark("(returned)");
    return said(r);
  };
}

// One cell of the table: each protocol with `participants` and `clients`,
// each row the median of the reps (taken in turn, so that a drift of the
// machine's speed touches every protocol alike).
std::vector<Row> measure_cell(const Args& a, const std::vector<std::string>& protocols, dlock::tx::Coordinator& seq,
                              dlock::tx::Coordinator& par, int participants, int clients) {
  std::vector<std::vector<Row>> reps(protocols.size());
  for (int rep = 0; rep < a.reps; ++rep)
    for (std::size_t i = 0; i < protocols.size(); ++i)
      reps[i].push_back(measure(a.postgres, protocols[i], participants, clients, a.seconds,
                                one_of(protocols[i], participants, seq, par)));
  std::vector<Row> out;
  for (auto& r : reps) out.push_back(median_row(std::move(r)));
  return out;
}

// A cell's rows, each beside the first (the limit).
void print_cell(const std::vector<Row>& cell) {
  const Row& l = cell.front();
  for (const Row& r : cell) {
    std::printf("  %-5s %d participants, %d client%s  %8.0f tx/s  p50 %8.0f us  p99 %8.0f us  %5.2fx the limit%s\n",
                r.protocol.c_str(), r.participants, r.clients, r.clients == 1 ? " " : "s", r.tx_per_s, r.p50_us,
                r.p99_us, r.tx_per_s / l.tx_per_s,
                r.failed ? ("  (" + std::to_string(r.failed) + " failed)").c_str() : "");
    std::fflush(stdout);
  }
}

void write_json(const Args& a, const std::vector<Row>& rows) {
  std::string list = "[";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    bench::JsonLine row;
    row.str("protocol", r.protocol).num("participants", r.participants).num("clients", r.clients);
    row.num("tx_per_s", r.tx_per_s).num("p50_us", r.p50_us).num("p99_us", r.p99_us).num("failed", r.failed);
    list += (i ? ",\n " : "\n ") + row.text();
  }
  bench::JsonLine j;
  j.str("load", a.load).num("seconds", a.seconds).num("reps", a.reps).raw("rows", list + "\n]");
  j.write(a.json);
}

int run(const Args& a, const std::vector<int>& client_counts, const std::vector<std::string>& protocols) {
  make_databases(a.postgres);
  for (int p = 0; p < kMaxParticipants; ++p)
    participant_pools.push_back(std::make_unique<ConnPool>(with_db(a.postgres, participant_db(p))));
  auto seq = open_coordinator(a.postgres, false);
  auto par = open_coordinator(a.postgres, true);
  std::vector<Row> rows;
  for (int participants : {2, 3})
    for (int clients : client_counts) {
      const std::vector<Row> cell = measure_cell(a, protocols, seq, par, participants, clients);
      print_cell(cell);
      rows.insert(rows.end(), cell.begin(), cell.end());
    }
  if (!a.json.empty()) write_json(a, rows);
  if (kStepDebug) step_times.print();
  long failed = 0;
  for (auto& r : rows) failed += r.failed;
  if (failed > 0) {
    std::cerr << "dlock-tx-bench: " << failed << " transactions did not commit\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  bench::Flags flags(a);
  flags.add("--postgres", a.postgres).add("--clients", a.clients).add("--protocols", a.protocols).add("--load", a.load);
  if (!flags.parse(argc, argv))
    return bench::usage(
        "dlock-tx-bench --postgres URL [--seconds 3] [--reps 3] [--clients 1,4,16] "
        "[--protocols limit,tcc,tcc-par,2pc,2pc-par] [--load idle] [--json FILE]",
        2);
  std::vector<int> client_counts;
  for (const auto& c : split(a.clients)) client_counts.push_back(std::atoi(c.c_str()));
  const std::vector<std::string> protocols = split(a.protocols);
  const bool counts_ok =
      !client_counts.empty() && std::all_of(client_counts.begin(), client_counts.end(), [](int c) { return c > 0; });
  if (a.postgres.empty() || a.reps < 1 || !counts_ok || protocols.empty() || a.seconds <= 0) {
    std::cerr << "dlock-tx-bench: --postgres URL is required; reps, clients and seconds must be positive\n";
    return 2;
  }
  return bench::exit_status("dlock-tx-bench", [&] { return run(a, client_counts, protocols); });
}

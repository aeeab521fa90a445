// dlock-sql-bench: a SQL backend beside its limit, in one run.
//
//   W1        one client, sequential acquire+release pairs on distinct names:
//             dlock and the limit, a minimal client running the same
//             statements on the same schema (SQLite: a sqlite3 loop of the
//             same transactions, and flock(2) on a file per name for scale;
//             PostgreSQL: a libpq loop calling the same functions)
//   W2        PostgreSQL only: --threads threads of one client, pairs on
//             distinct names, beside as many libpq connections (one per
//             thread) calling the same functions
//   W3        --procs processes on one lock, critical section = a counter in
//             a file (read, +1, write): critical sections per second, the
//             hand-off latency (a release to the next holder's grant, across
//             processes), the same-holder fraction, and lost updates
//
//   dlock-sql-bench [--postgres URL] [--seconds 3] [--reps 3] [--procs 4] [--threads 8] [--json FILE]
// Without --postgres: SQLite files in a temp dir. Medians over the reps;
// every rep runs each client in turn.
#include <fcntl.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <dlock/dlock.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "handoff.hpp"
#include "harness.hpp"

namespace {

namespace bench = dlock::bench;

struct Args : bench::RunFlags {
  int procs = 4;
  int threads = 8;
  std::string postgres;  // a postgres:// URL: measure that backend instead of SQLite
};

bench::Pairs w1_dlock(const std::string& url, double seconds) {
  auto client = dlock::Client::connect(url);
  return bench::run_pairs(seconds, [&](long long i) {
    auto lease = client.acquire("w1:" + std::to_string(i), std::chrono::milliseconds(0));
    if (!lease.ok() || !lease->release().ok()) throw std::runtime_error("dlock pair failed");
  });
}

// The limit: dlock's transactions, by hand, on dlock's schema (created by a
// dlock client first), with the same pragmas.
class Limit {
 public:
  explicit Limit(const std::string& path) {
    { auto c = dlock::Client::connect("sqlite://" + path); }  // creates the schema
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) throw std::runtime_error("sqlite3_open failed");
    exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL");
    sqlite3_busy_timeout(db_, 5000);
    read_ = prep(
        "SELECT owner, grant_id, depth, fence, expires_ms, boot_id, pid, pid_start, pid_ns, releases "
        "FROM dlock_locks WHERE name = ?1");
    fence_ = prep("UPDATE dlock_meta SET value = value + 1 WHERE key = 'fence' RETURNING value");
    write_ = prep(
        "INSERT INTO dlock_locks (name, owner, grant_id, depth, fence, expires_ms, boot_id, pid, pid_start, "
        "pid_ns) VALUES (?1, 'o', 1, 1, ?2, 1, 'b', 1, 1, 'n') ON CONFLICT (name) DO UPDATE SET "
        "owner = excluded.owner, fence = excluded.fence");
    free_ = prep("UPDATE dlock_locks SET owner = NULL, depth = 0, releases = releases + 1 WHERE name = ?1");
  }
  ~Limit() {
    for (auto* s : {read_, fence_, write_, free_}) sqlite3_finalize(s);
    sqlite3_close(db_);
  }
  void pair(const std::string& name) {
    exec("BEGIN IMMEDIATE");
    step(read_, name);
    sqlite3_step(fence_);
    const auto fence = sqlite3_column_int64(fence_, 0);
    sqlite3_reset(fence_);
    sqlite3_bind_text(write_, 1, name.data(), static_cast<int>(name.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(write_, 2, fence);
    step(write_, name, false);
    exec("COMMIT");
    exec("BEGIN IMMEDIATE");
    step(read_, name);
    step(free_, name);
    exec("COMMIT");
  }

 private:
  void exec(const char* sql) {
    if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) throw std::runtime_error(sqlite3_errmsg(db_));
  }
  sqlite3_stmt* prep(const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error(sqlite3_errmsg(db_));
    return s;
  }
  void step(sqlite3_stmt* s, const std::string& name, bool bind = true) {
    if (bind) sqlite3_bind_text(s, 1, name.data(), static_cast<int>(name.size()), SQLITE_TRANSIENT);
    while (sqlite3_step(s) == SQLITE_ROW) {
    }
    sqlite3_reset(s);
  }
  sqlite3* db_ = nullptr;
  sqlite3_stmt *read_ = nullptr, *fence_ = nullptr, *write_ = nullptr, *free_ = nullptr;
};

bench::Pairs w1_limit(const std::string& dir, double seconds) {
  Limit limit(dir + "/limit.db");
  return bench::run_pairs(seconds, [&](long long i) { limit.pair("w1:" + std::to_string(i)); });
}

// Runs pair(thread, i) on `threads` threads for `seconds`: total pairs/s.
template <class Pair>
double run_threads(int threads, double seconds, Pair pair) {
  std::atomic<long long> total{0};
  std::vector<std::thread> ts;
  const auto start = bench::Clock::now();
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      total += static_cast<long long>(bench::run_pairs(seconds, [&](long long i) { pair(t, i); }).per_s * seconds);
    });
  for (auto& t : ts) t.join();
  return static_cast<double>(total) / std::chrono::duration<double>(bench::Clock::now() - start).count();
}

// The PostgreSQL limit: libpq calling the functions dlock calls, one round
// trip each, on the schema a dlock client made; one connection per thread.
bench::Pairs pg_limit(const std::string& url, double seconds, int threads) {
  { auto c = dlock::Client::connect(url); }  // creates the schema
  const std::string conninfo = "postgresql://" + url.substr(url.find("://") + 3);
  std::vector<PGconn*> conns;
  for (int t = 0; t < threads; ++t) {
    conns.push_back(PQconnectdb(conninfo.c_str()));
    if (PQstatus(conns.back()) != CONNECTION_OK) throw std::runtime_error(PQerrorMessage(conns.back()));
  }
  auto call = [](PGconn* pg, const char* sql, const std::vector<std::string>& args) {
    std::vector<const char*> v;
    for (const auto& a : args) v.push_back(a.c_str());
    PGresult* r = PQexecParams(pg, sql, static_cast<int>(v.size()), nullptr, v.data(), nullptr, nullptr, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) throw std::runtime_error(PQerrorMessage(pg));
    PQclear(r);
  };
  auto pair = [&](int t, long long i) {
    const std::string name = "pgl:" + std::to_string(t) + ":" + std::to_string(i);
    // The same statement dlock sends, its holder description included.
    call(conns[t], "SELECT kind, fence, depth, ttl_ms FROM dlock_locks_acquire($1, $2, $3, $4, $5, $6)",
         {name, "limit", "1", "0", "30000", "sql_bench[1]@localhost"});
    call(conns[t], "SELECT kind, depth FROM dlock_locks_release($1, $2, $3, $4, $5, $6)",
         {name, "limit", "1", "1", "false", "0"});
  };
  const bench::Pairs p = threads == 1 ? bench::run_pairs(seconds, [&](long long i) { pair(0, i); })
                                      : bench::Pairs{run_threads(threads, seconds, pair), 0};
  for (PGconn* c : conns) PQfinish(c);
  return p;
}

double w2_dlock(const std::string& url, double seconds, int threads) {
  auto client = dlock::Client::connect(url);
  return run_threads(threads, seconds, [&](int t, long long i) {
    auto lease = client.acquire("w2:" + std::to_string(t) + ":" + std::to_string(i), std::chrono::milliseconds(0));
    if (!lease.ok() || !lease->release().ok()) throw std::runtime_error("dlock pair failed");
  });
}

bench::Pairs w1_flock(const std::string& dir, double seconds) {
  return bench::run_pairs(seconds, [&](long long i) {
    const std::string path = dir + "/flock." + std::to_string(i % 1000);
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) throw std::runtime_error("flock failed");
    flock(fd, LOCK_UN);
    close(fd);
  });
}

// One rep of W1 for one client.
bench::Pairs w1(const Args& a, const std::string& dir, const std::string& client) {
  const bool pg = !a.postgres.empty();
  if (client == "dlock") return w1_dlock(pg ? a.postgres : "sqlite://" + dir + "/dlock.db", a.seconds);
  if (client == "flock(2)") return w1_flock(dir, a.seconds);
  return pg ? pg_limit(a.postgres, a.seconds, 1) : w1_limit(dir, a.seconds);
}

// The limit's name in the tables.
std::string limit_of(const Args& a) { return a.postgres.empty() ? "sqlite3 loop (limit)" : "libpq loop (limit)"; }

// Prints the medians and writes the JSON line; the exit status: 1 if W3
// lost an update.
int report(const Args& a, const bench::PairsByClient& w1, const bench::PairsByClient& w2,
           const bench::HandoffReps& w3) {
  const bool pg = !a.postgres.empty();
  const std::string limit = limit_of(a);
  std::printf("%s\nW1, one client, acquire+release pairs (median of %d reps of %.1f s)\n", pg ? "PostgreSQL" : "SQLite",
              a.reps, a.seconds);
  w1.print(limit, 24);
  if (pg) {
    std::printf("W2, %d threads of one client, pairs on distinct names\n", a.threads);
    for (const std::string& name : {std::string("dlock"), limit})
      std::printf("  %-24s %12.0f %10s %13.2fx\n", name.c_str(), w2.rate(name), "", w2.rate(name) / w2.rate(limit));
  }
  w3.print(a.procs, false);
  bench::JsonLine j;
  j.str("store", pg ? "postgres" : "sqlite");
  j.num("w1_dlock_pairs_per_s", w1.rate("dlock")).num("w1_limit_pairs_per_s", w1.rate(limit));
  j.num("w1_flock_pairs_per_s", w1.rate("flock(2)"));
  j.num("w2_dlock_pairs_per_s", w2.rate("dlock")).num("w2_limit_pairs_per_s", w2.rate(limit));
  w3.add_json(j, false);
  j.write(a.json);
  return w3.lost() == 0 ? 0 : 1;
}

int run(const Args& a, const std::string& dir) {
  const bool pg = !a.postgres.empty();
  std::vector<std::string> names = {"dlock", limit_of(a)};
  if (!pg) names.push_back("flock(2)");
  bench::PairsByClient w1s, w2;  // W2: no latency, only pairs/s
  bench::HandoffReps w3;
  for (int r = 0; r < a.reps; ++r) {
    for (const auto& name : names) w1s.add(name, w1(a, dir, name));
    if (pg) {
      w2.add("dlock", {w2_dlock(a.postgres, a.seconds, a.threads), 0});
      w2.add(limit_of(a), pg_limit(a.postgres, a.seconds, a.threads));
    }
    w3.add(bench::measure_handoff(pg ? a.postgres : "sqlite://" + dir + "/w3.db", {}, dir, a.seconds, a.procs));
  }
  return report(a, w1s, w2, w3);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  bench::Flags flags(a);
  if (!flags.add("--procs", a.procs).add("--threads", a.threads).add("--postgres", a.postgres).parse(argc, argv))
    return bench::usage(
        "dlock-sql-bench [--postgres URL] [--seconds S] [--reps N] [--procs P] [--threads T] [--json FILE]", 64);
  a.threads = std::max(1, a.threads);
  return bench::in_temp_dir("dlock-sql-bench", [&](const std::string& dir) { return run(a, dir); });
}

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
#include <stdlib.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <dlock/dlock.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct Args {
  double seconds = 3;
  int reps = 3;
  int procs = 4;
  int threads = 8;
  std::string json;
  std::string postgres;  // a postgres:// URL: measure that backend instead of SQLite
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

long long mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

struct Pairs {
  double per_s = 0;
  double p50_us = 0;
};

template <class Pair>
Pairs run_pairs(double seconds, Pair pair) {
  std::vector<double> lat;
  lat.reserve(100000);
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  long long i = 0;
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    pair(i++);
    lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return {static_cast<double>(i) / std::chrono::duration<double>(Clock::now() - start).count(), percentile(lat, 0.5)};
}

Pairs w1_dlock(const std::string& url, double seconds) {
  auto client = dlock::Client::connect(url);
  return run_pairs(seconds, [&](long long i) {
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

Pairs w1_limit(const std::string& dir, double seconds) {
  Limit limit(dir + "/limit.db");
  return run_pairs(seconds, [&](long long i) { limit.pair("w1:" + std::to_string(i)); });
}

// Runs pair(thread, i) on `threads` threads for `seconds`: total pairs/s.
template <class Pair>
double run_threads(int threads, double seconds, Pair pair) {
  std::atomic<long long> total{0};
  std::vector<std::thread> ts;
  const auto start = Clock::now();
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      total += static_cast<long long>(run_pairs(seconds, [&](long long i) { pair(t, i); }).per_s * seconds);
    });
  for (auto& t : ts) t.join();
  return static_cast<double>(total) / std::chrono::duration<double>(Clock::now() - start).count();
}

// The PostgreSQL limit: libpq calling the functions dlock calls, one round
// trip each, on the schema a dlock client made; one connection per thread.
Pairs pg_limit(const std::string& url, double seconds, int threads) {
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
  const Pairs p = threads == 1 ? run_pairs(seconds, [&](long long i) { pair(0, i); })
                               : Pairs{run_threads(threads, seconds, pair), 0};
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

Pairs w1_flock(const std::string& dir, double seconds) {
  return run_pairs(seconds, [&](long long i) {
    const std::string path = dir + "/flock." + std::to_string(i % 1000);
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) throw std::runtime_error("flock failed");
    flock(fd, LOCK_UN);
    close(fd);
  });
}

struct Handoff {
  double cs_per_s = 0, p50_us = 0, p99_us = 0, same_holder = 0;
  long long lost = 0;
};

long long read_counter(const std::string& path) {
  std::ifstream in(path);
  long long v = 0;
  in >> v;
  return v;
}

Handoff w3(const std::string& url, const std::string& dir, double seconds, int procs) {
  const std::string counter = dir + "/w3.counter";
  fs::remove(counter);
  std::vector<pid_t> kids;
  for (int k = 0; k < procs; ++k) {
    const pid_t pid = fork();
    if (pid == 0) {
      int rc = 0;
      try {
        auto client = dlock::Client::connect(url);
        dlock::Mutex m(client, "w3");
        std::ofstream ev(dir + "/w3.events." + std::to_string(k));
        const auto end = Clock::now() + std::chrono::duration<double>(seconds);
        while (Clock::now() < end) {
          m.lock();
          const long long got = mono_ns();
          const long long v = read_counter(counter);  // read before the write truncates it
          std::ofstream(counter, std::ios::trunc) << v + 1;
          const long long rel = mono_ns();
          m.unlock();
          ev << got << ' ' << rel << '\n';
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "w3 worker: %s\n", e.what());
        rc = 1;
      }
      _exit(rc);
    }
    kids.push_back(pid);
  }
  for (pid_t p : kids) {
    int st = 0;
    waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) throw std::runtime_error("a W3 worker failed");
  }
  struct Ev {
    long long got, rel;
    int proc;
  };
  std::vector<Ev> evs;
  for (int k = 0; k < procs; ++k) {
    std::ifstream in(dir + "/w3.events." + std::to_string(k));
    long long g = 0, r = 0;
    while (in >> g >> r) evs.push_back({g, r, k});
  }
  std::sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) { return a.got < b.got; });
  Handoff h;
  std::vector<double> gaps;
  long long same = 0;
  for (std::size_t i = 1; i < evs.size(); ++i) {
    if (evs[i].proc == evs[i - 1].proc) {
      ++same;
      continue;
    }
    gaps.push_back(static_cast<double>(evs[i].got - evs[i - 1].rel) / 1000.0);
  }
  h.cs_per_s = static_cast<double>(evs.size()) / seconds;
  h.p50_us = percentile(gaps, 0.5);
  h.p99_us = percentile(gaps, 0.99);
  h.same_holder = evs.size() > 1 ? static_cast<double>(same) / static_cast<double>(evs.size() - 1) : 0;
  h.lost = static_cast<long long>(evs.size()) - read_counter(counter);
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--seconds" && i + 1 < argc)
      a.seconds = std::atof(argv[++i]);
    else if (k == "--reps" && i + 1 < argc)
      a.reps = std::atoi(argv[++i]);
    else if (k == "--procs" && i + 1 < argc)
      a.procs = std::atoi(argv[++i]);
    else if (k == "--threads" && i + 1 < argc)
      a.threads = std::max(1, std::atoi(argv[++i]));
    else if (k == "--json" && i + 1 < argc)
      a.json = argv[++i];
    else if (k == "--postgres" && i + 1 < argc)
      a.postgres = argv[++i];
    else {
      std::cerr << "usage: dlock-sql-bench [--postgres URL] [--seconds S] [--reps N] [--procs P] [--threads T] [--json "
                   "FILE]\n";
      return 64;
    }
  }
  char tmpl[] = "/tmp/dlock-sql-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  int rc = 0;
  try {
    std::map<std::string, std::vector<double>> rate, p50, w2;
    std::vector<double> cs, h50, h99, same;
    long long lost = 0;
    const bool pg = !a.postgres.empty();
    const std::string limit_name = pg ? "libpq loop (limit)" : "sqlite3 loop (limit)";
    std::vector<std::string> names = {"dlock", limit_name};
    if (!pg) names.push_back("flock(2)");
    for (int r = 0; r < a.reps; ++r) {
      for (const auto& name : names) {
        Pairs p;
        if (name == "dlock")
          p = w1_dlock(pg ? a.postgres : "sqlite://" + dir + "/dlock.db", a.seconds);
        else if (name == "flock(2)")
          p = w1_flock(dir, a.seconds);
        else if (pg)
          p = pg_limit(a.postgres, a.seconds, 1);
        else
          p = w1_limit(dir, a.seconds);
        rate[name].push_back(p.per_s);
        p50[name].push_back(p.p50_us);
      }
      if (pg) {
        w2["dlock"].push_back(w2_dlock(a.postgres, a.seconds, a.threads));
        w2[limit_name].push_back(pg_limit(a.postgres, a.seconds, a.threads).per_s);
      }
      const Handoff h = w3(pg ? a.postgres : "sqlite://" + dir + "/w3.db", dir, a.seconds, a.procs);
      cs.push_back(h.cs_per_s);
      h50.push_back(h.p50_us);
      h99.push_back(h.p99_us);
      same.push_back(h.same_holder);
      lost += h.lost;
    }
    std::printf("%s\nW1, one client, acquire+release pairs (median of %d reps of %.1f s)\n",
                pg ? "PostgreSQL" : "SQLite", a.reps, a.seconds);
    std::printf("  %-24s %12s %10s %14s\n", "client", "pairs/s", "p50 us", "vs the limit");
    const double limit = median(rate[limit_name]);
    for (const auto& name : names)
      std::printf("  %-24s %12.0f %10.1f %13.2fx\n", name.c_str(), median(rate[name]), median(p50[name]),
                  median(rate[name]) / limit);
    if (pg) {
      std::printf("W2, %d threads of one client, pairs on distinct names\n", a.threads);
      for (const auto& name : names)
        std::printf("  %-24s %12.0f %10s %13.2fx\n", name.c_str(), median(w2[name]), "",
                    median(w2[name]) / median(w2[limit_name]));
    }
    std::printf(
        "W3, %d processes on one lock\n  %.0f critical sections/s, hand-off p50 %.0f us, p99 %.0f us, "
        "same-holder fraction %.2f, lost updates %lld\n",
        a.procs, median(cs), median(h50), median(h99), median(same), lost);
    if (!a.json.empty()) {
      std::ofstream j(a.json);
      j << "{\"store\": \"" << (pg ? "postgres" : "sqlite") << "\", \"w1_dlock_pairs_per_s\": " << median(rate["dlock"])
        << ", \"w1_limit_pairs_per_s\": " << limit << ", \"w1_flock_pairs_per_s\": " << median(rate["flock(2)"])
        << ", \"w2_dlock_pairs_per_s\": " << median(w2["dlock"])
        << ", \"w2_limit_pairs_per_s\": " << median(w2[limit_name]) << ", \"w3_cs_per_s\": " << median(cs)
        << ", \"w3_handoff_p50_us\": " << median(h50) << ", \"w3_handoff_p99_us\": " << median(h99)
        << ", \"w3_same_holder\": " << median(same) << ", \"w3_lost\": " << lost << "}\n";
    }
    if (lost != 0) rc = 1;
  } catch (const std::exception& e) {
    std::cerr << "dlock-sql-bench: " << e.what() << '\n';
    rc = 1;
  }
  fs::remove_all(dir);
  return rc;
}

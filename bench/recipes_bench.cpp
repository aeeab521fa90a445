// dlock-recipes-bench: the recipes (fair Mutex, Semaphore, SharedMutex) on
// any backend, by URL, through the public API only; one workload per run,
// one JSON result.
//
//   W3     --procs processes on one Mutex (LockOptions::fair = --fair),
//          critical section = a counter (Redis: GET/SET on the server, as
//          dlock-bench's W3; other backends: a file, as dlock-sql-bench's):
//          critical sections/s, same-holder fraction, hand-off p50/p99 (all
//          pairs and holder changes), acquire-wait p50/p99/max, lost updates,
//          overlapping critical sections
//   SEM    --procs processes on one Semaphore of --permits, each looping
//          {acquire; read a file; release}: pairs/s, acquire-wait p50/p99,
//          and the most holders seen at once (from the timestamps; must be
//          <= permits)
//   RW     --procs processes on one SharedMutex, each operation a read
//          (lock_shared, reading a counter in a file) with probability
//          --readers, else a write (lock, bumping that counter): operations/s, reads and writes apart,
//          wait p50/p99 of each, writers overlapping anyone (must be 0), the
//          most readers at once, lost writes
//   SEM-limit, RW-limit  the same round trips by a minimal client (see
//          limit_zk and limit_redis below): each of --procs processes on a
//          name of its own, so every acquire is granted at once: the pair
//          rate no client of the same requests can beat on this server
//
// An acquire that fails with an error (unavailable, timeout) is counted in
// acquire_errors, its first message kept, and the worker goes on.
//
//   dlock-recipes-bench --url URL --workload W3|SEM|RW|SEM-limit|RW-limit
//       [--fair 0|1] [--procs 8] [--permits 3] [--readers 0.9] [--seconds 5]
//       [--name NAME] --out FILE
// Every process starts its clock after all have connected (a barrier),
// and all timestamps are CLOCK_MONOTONIC, shared by the processes of a host.
#include <hiredis/hiredis.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlock/dlock.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "zk_batch.hpp"

namespace {

using dlock::bench::Clock;
using dlock::bench::mono_ns;
using dlock::bench::num;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct Args {
  std::string url;
  std::string workload = "W3";
  bool fair = false;
  int procs = 8;
  unsigned permits = 3;
  double readers = 0.9;
  double seconds = 5;
  std::string name;
  std::string out;
};

// Nearest-rank percentile, as bench/report.py computes it.
double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::max(1.0, std::ceil(p / 100.0 * static_cast<double>(v.size()))));
  return v[std::min(rank, v.size()) - 1];
}

bool is_redis(const std::string& url) { return url.rfind("redis://", 0) == 0; }
bool is_zk(const std::string& url) { return url.rfind("zk://", 0) == 0; }
std::string backend_of(const std::string& url) { return url.substr(0, url.find("://")); }

// host and port of a redis:// or zk:// URL (the first host).
std::pair<std::string, int> host_port(const std::string& url) {
  auto start = url.find("://") + 3;
  auto end = url.find_first_of("/?,", start);
  std::string hp = url.substr(start, end == std::string::npos ? std::string::npos : end - start);
  if (auto at = hp.rfind('@'); at != std::string::npos) hp = hp.substr(at + 1);
  auto colon = hp.rfind(':');
  return {hp.substr(0, colon), std::stoi(hp.substr(colon + 1))};
}

dlock::ClientOptions quiet() {
  dlock::ClientOptions o;
  o.command_timeout = 5000ms;
  o.logger = [](dlock::LogLevel l, std::string_view m) {
    if (l >= dlock::LogLevel::warning) std::fprintf(stderr, "dlock: %.*s\n", static_cast<int>(m.size()), m.data());
  };
  return o;
}

// One critical section (or pair) as a worker saw it.
struct Ev {
  int proc = 0;
  char kind = 'x';  // x exclusive, r read, w write, s semaphore permit
  long long acq_call = 0, acq_ret = 0, rel_call = 0;
};

// The application's counter: on the Redis server (as W3) or in a file.
class Counter {
 public:
  Counter(const std::string& url, const std::string& path) : path_(path) {
    if (is_redis(url)) {
      auto [h, p] = host_port(url);
      c_ = redisConnect(h.c_str(), p);
      if (c_ == nullptr || c_->err) throw std::runtime_error("cannot connect to Redis for the counter");
    }
  }
  ~Counter() {
    if (c_) redisFree(c_);
  }
  long long get() {
    if (!c_) {
      std::ifstream in(path_);
      long long v = 0;
      in >> v;
      return v;
    }
    auto* r = static_cast<redisReply*>(redisCommand(c_, "GET bench:recipes:ctr"));
    if (r == nullptr) throw std::runtime_error("counter GET failed");
    long long v = r->type == REDIS_REPLY_STRING ? std::stoll(std::string(r->str, r->len)) : 0;
    freeReplyObject(r);
    return v;
  }
  void set(long long v) {
    if (!c_) {
      std::ofstream(path_, std::ios::trunc) << v;
      return;
    }
    auto* r = static_cast<redisReply*>(redisCommand(c_, "SET bench:recipes:ctr %lld", v));
    if (r == nullptr) throw std::runtime_error("counter SET failed");
    freeReplyObject(r);
  }
  void reset() {
    if (!c_) {
      fs::remove(path_);
      return;
    }
    freeReplyObject(redisCommand(c_, "DEL bench:recipes:ctr"));
  }

 private:
  std::string path_;
  redisContext* c_ = nullptr;
};

// The backend refused the recipe (invalid_argument): reported as such.
struct Refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs body(k, events) in --procs forked processes (each writes its events
// to ev.<k> in dir) and gathers their events, ordered by grant time.
std::vector<Ev> run_procs(const Args& a, const std::string& dir,
                          const std::function<void(int, std::vector<Ev>&)>& body) {
  std::vector<pid_t> kids;
  for (int k = 0; k < a.procs; ++k) {
    const pid_t pid = fork();
    if (pid == 0) {
      int rc = 0;
      try {
        std::vector<Ev> evs;
        evs.reserve(200000);
        body(k, evs);
      } catch (const dlock::Error& e) {
        // A backend that does not offer the recipe refuses it: said once, not a failure.
        if (e.code() == dlock::Errc::invalid_argument) {
          if (k == 0) std::ofstream(dir + "/refused") << e.what();
          rc = 3;
        } else {
          std::fprintf(stderr, "recipes worker %d: %s\n", k, e.what());
          rc = 1;
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "recipes worker %d: %s\n", k, e.what());
        rc = 1;
      }
      std::fflush(nullptr);
      _exit(rc);
    }
    kids.push_back(pid);
  }
  int failures = 0, refusals = 0;
  for (pid_t p : kids) {
    int st = 0;
    waitpid(p, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
      ++refusals;
    else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      ++failures;
  }
  if (refusals && !failures) {
    std::ifstream in(dir + "/refused");
    std::string why((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    throw Refused(why.empty() ? "refused" : why);
  }
  if (failures) throw std::runtime_error(std::to_string(failures) + " worker(s) failed");
  std::vector<Ev> all;
  for (int k = 0; k < a.procs; ++k) {
    std::ifstream in(dir + "/ev." + std::to_string(k));
    Ev e;
    e.proc = k;
    while (in >> e.kind >> e.acq_call >> e.acq_ret >> e.rel_call) all.push_back(e);
  }
  std::sort(all.begin(), all.end(), [](const Ev& x, const Ev& y) { return x.acq_ret < y.acq_ret; });
  return all;
}

// The barrier: every worker connects first, then all start together (each
// leaves a file in dir and waits until every worker's is there).
struct Barrier {
  std::string dir;
  int procs;
  void ready_and_wait(int k) const {
    std::ofstream(dir + "/ready." + std::to_string(k)) << 1;
    for (;;) {
      int n = 0;
      for (int i = 0; i < procs; ++i) n += fs::exists(dir + "/ready." + std::to_string(i));
      if (n == procs) return;
      std::this_thread::sleep_for(1ms);
    }
  }
};

// An acquire that failed with an error other than a refusal (unavailable,
// timeout: the store was too busy to answer in time) is counted, its first
// message kept, and the worker goes on: the result says how often.
struct Errors {
  long long n = 0;
  std::string first;
  // Runs acquire(); false (counted) if it threw such an error.
  template <class F>
  bool attempt(F&& acquire) {
    try {
      acquire();
      return true;
    } catch (const dlock::Error& e) {
      if (e.code() == dlock::Errc::invalid_argument) throw;
      if (n++ == 0) first = e.what();
      return false;
    }
  }
  void save(const std::string& dir, int k) const {
    std::ofstream(dir + "/errors." + std::to_string(k)) << n << '\n' << first << '\n';
  }
};

// The errors of every worker, into the result.
void add_errors(std::map<std::string, std::string>& r, int procs, const std::string& dir) {
  long long total = 0;
  std::string first;
  for (int k = 0; k < procs; ++k) {
    std::ifstream in(dir + "/errors." + std::to_string(k));
    long long n = 0;
    std::string line;
    if (in >> n) {
      std::getline(in, line);
      std::getline(in, line);
    }
    total += n;
    if (first.empty() && n > 0) first = line;
  }
  r["acquire_errors"] = std::to_string(total);
  if (!first.empty()) {
    std::string esc;
    for (char c : first) esc += c == '"' || c == '\\' ? '\'' : c;
    r["first_error"] = "\"" + esc + "\"";
  }
}

// The client's counters at the end of a worker's run, and their sums over
// the workers per critical section or pair: requests sent (commands_sent)
// and waiters woken by a release notification (wakeups).
void save_stats(const std::string& dir, int k, const dlock::Client& client) {
  const auto st = client.stats();
  std::ofstream(dir + "/stats." + std::to_string(k)) << st.commands_sent << ' ' << st.wakeups << '\n';
}
void add_stats(std::map<std::string, std::string>& r, int procs, const std::string& dir, std::size_t ops) {
  long long sent = 0, woken = 0;
  for (int k = 0; k < procs; ++k) {
    std::ifstream in(dir + "/stats." + std::to_string(k));
    long long c = 0, w = 0;
    if (in >> c >> w) sent += c, woken += w;
  }
  const double n = ops > 0 ? static_cast<double>(ops) : 1.0;
  r["requests_per_op"] = num(static_cast<double>(sent) / n);
  r["wakeups_per_op"] = num(static_cast<double>(woken) / n);
}

void write_events(const std::string& dir, int k, const std::vector<Ev>& evs) {
  std::ofstream out(dir + "/ev." + std::to_string(k));
  for (const auto& e : evs) out << e.kind << ' ' << e.acq_call << ' ' << e.acq_ret << ' ' << e.rel_call << '\n';
}

// Most intervals [acq_ret, rel_call] open at once, among those of `kinds`.
int max_concurrent(const std::vector<Ev>& evs, const std::string& kinds) {
  std::vector<std::pair<long long, int>> pts;
  for (const auto& e : evs)
    if (kinds.find(e.kind) != std::string::npos) {
      pts.push_back({e.acq_ret, +1});
      pts.push_back({e.rel_call, -1});
    }
  std::sort(pts.begin(), pts.end());  // a release at t sorts before a grant at t
  int cur = 0, best = 0;
  for (auto [t, d] : pts) best = std::max(best, cur += d);
  return best;
}

using Result = std::map<std::string, std::string>;

Result base(const Args& a) {
  Result r;
  r["library"] = "\"dlock\"";
  r["backend"] = "\"" + backend_of(a.url) + "\"";
  r["workload"] = "\"" + a.workload + "\"";
  r["procs"] = std::to_string(a.procs);
  r["seconds"] = num(a.seconds);
  return r;
}

void wait_stats(Result& r, const std::string& prefix, const std::vector<Ev>& evs, const std::string& kinds) {
  std::vector<double> w;
  for (const auto& e : evs)
    if (kinds.find(e.kind) != std::string::npos) w.push_back(static_cast<double>(e.acq_ret - e.acq_call) / 1000.0);
  r[prefix + "wait_p50_us"] = num(pct(w, 50));
  r[prefix + "wait_p99_us"] = num(pct(w, 99));
  r[prefix + "wait_max_ms"] = num(w.empty() ? 0 : *std::max_element(w.begin(), w.end()) / 1000.0);
}

void per_proc(Result& r, const Args& a, const std::vector<Ev>& evs) {
  std::vector<long long> n(static_cast<std::size_t>(a.procs), 0);
  for (const auto& e : evs) ++n[static_cast<std::size_t>(e.proc)];
  r["per_proc_min"] = std::to_string(*std::min_element(n.begin(), n.end()));
  r["per_proc_max"] = std::to_string(*std::max_element(n.begin(), n.end()));
}

Result w3(const Args& a, const std::string& dir) {
  Counter(a.url, dir + "/counter").reset();
  Barrier bar{dir, a.procs};
  auto evs = run_procs(a, dir, [&](int k, std::vector<Ev>& out) {
    auto client = dlock::Client::connect(a.url, quiet());
    Counter ctr(a.url, dir + "/counter");
    dlock::LockOptions o;
    o.fair = a.fair;
    dlock::Mutex m(client, a.name, o);
    Errors errs;
    bar.ready_and_wait(k);
    const auto end = Clock::now() + std::chrono::duration<double>(a.seconds);
    while (Clock::now() < end) {
      Ev e;
      e.acq_call = mono_ns();
      if (!errs.attempt([&] { m.lock(); })) continue;
      e.acq_ret = mono_ns();
      ctr.set(ctr.get() + 1);
      e.rel_call = mono_ns();
      m.unlock();
      out.push_back(e);
    }
    errs.save(dir, k);
    save_stats(dir, k, client);
    write_events(dir, k, out);
  });
  Result r = base(a);
  r["fair"] = a.fair ? "true" : "false";
  add_errors(r, a.procs, dir);
  add_stats(r, a.procs, dir, evs.size());
  const long long cs = static_cast<long long>(evs.size());
  std::vector<double> all, change;
  long long same = 0;
  for (std::size_t i = 1; i < evs.size(); ++i) {
    const double h = static_cast<double>(evs[i].acq_ret - evs[i - 1].rel_call) / 1000.0;
    all.push_back(h);
    if (evs[i].proc == evs[i - 1].proc)
      ++same;
    else
      change.push_back(h);
  }
  r["critical_sections"] = std::to_string(cs);
  r["cs_per_s"] = num(static_cast<double>(cs) / a.seconds);
  r["same_holder_fraction"] = num(cs > 1 ? static_cast<double>(same) / static_cast<double>(cs - 1) : 0);
  r["handoff_p50_us"] = num(pct(all, 50));
  r["handoff_p99_us"] = num(pct(all, 99));
  r["change_p50_us"] = num(pct(change, 50));
  r["change_p99_us"] = num(pct(change, 99));
  r["changes"] = std::to_string(change.size());
  wait_stats(r, "", evs, "x");
  per_proc(r, a, evs);
  const long long counter = Counter(a.url, dir + "/counter").get();
  r["lost_updates"] = std::to_string(cs - counter);
  r["overlaps"] = std::to_string(max_concurrent(evs, "x") > 1 ? max_concurrent(evs, "x") - 1 : 0);
  return r;
}

Result sem(const Args& a, const std::string& dir) {
  Barrier bar{dir, a.procs};
  auto evs = run_procs(a, dir, [&](int k, std::vector<Ev>& out) {
    auto client = dlock::Client::connect(a.url, quiet());
    Counter ctr("", dir + "/counter");
    dlock::Semaphore s(client, a.name, a.permits);
    Errors errs;
    bar.ready_and_wait(k);
    const auto end = Clock::now() + std::chrono::duration<double>(a.seconds);
    while (Clock::now() < end) {
      Ev e;
      e.kind = 's';
      e.acq_call = mono_ns();
      if (!errs.attempt([&] { s.acquire(); })) continue;
      e.acq_ret = mono_ns();
      (void)ctr.get();  // a few µs of work, so that overlapping holds show
      e.rel_call = mono_ns();
      if (dlock::Status released = s.release(); !released.ok()) throw dlock::Error(released);
      out.push_back(e);
    }
    errs.save(dir, k);
    save_stats(dir, k, client);
    write_events(dir, k, out);
  });
  Result r = base(a);
  r["permits"] = std::to_string(a.permits);
  add_errors(r, a.procs, dir);
  add_stats(r, a.procs, dir, evs.size());
  r["pairs"] = std::to_string(evs.size());
  r["pairs_per_s"] = num(static_cast<double>(evs.size()) / a.seconds);
  wait_stats(r, "", evs, "s");
  per_proc(r, a, evs);
  r["max_holders"] = std::to_string(max_concurrent(evs, "s"));
  return r;
}

Result rw(const Args& a, const std::string& dir) {
  Counter("", dir + "/counter").reset();
  Barrier bar{dir, a.procs};
  auto evs = run_procs(a, dir, [&](int k, std::vector<Ev>& out) {
    auto client = dlock::Client::connect(a.url, quiet());
    Counter ctr("", dir + "/counter");  // a file: the writers' lost-update check
    dlock::SharedMutex m(client, a.name);
    std::mt19937_64 rng(static_cast<std::uint64_t>(getpid()) * 7919u + static_cast<std::uint64_t>(k));
    std::bernoulli_distribution reader(a.readers);
    Errors errs;
    bar.ready_and_wait(k);
    const auto end = Clock::now() + std::chrono::duration<double>(a.seconds);
    while (Clock::now() < end) {
      Ev e;
      e.kind = reader(rng) ? 'r' : 'w';
      e.acq_call = mono_ns();
      if (!errs.attempt([&] { e.kind == 'r' ? m.lock_shared() : m.lock(); })) continue;
      if (e.kind == 'r') {
        e.acq_ret = mono_ns();
        (void)ctr.get();
        e.rel_call = mono_ns();
        m.unlock_shared();
      } else {
        e.acq_ret = mono_ns();
        ctr.set(ctr.get() + 1);
        e.rel_call = mono_ns();
        m.unlock();
      }
      if (!m.last_release_status().ok()) throw dlock::Error(m.last_release_status());
      out.push_back(e);
    }
    errs.save(dir, k);
    save_stats(dir, k, client);
    write_events(dir, k, out);
  });
  Result r = base(a);
  r["readers_fraction"] = num(a.readers);
  add_errors(r, a.procs, dir);
  add_stats(r, a.procs, dir, evs.size());
  long long reads = 0, writes = 0;
  for (const auto& e : evs) (e.kind == 'r' ? reads : writes)++;
  r["ops"] = std::to_string(evs.size());
  r["ops_per_s"] = num(static_cast<double>(evs.size()) / a.seconds);
  r["reads_per_s"] = num(static_cast<double>(reads) / a.seconds);
  r["writes_per_s"] = num(static_cast<double>(writes) / a.seconds);
  wait_stats(r, "read_", evs, "r");
  wait_stats(r, "write_", evs, "w");
  per_proc(r, a, evs);
  // A writer overlapping anyone: sweep writers against every interval.
  long long overlaps = 0;
  {
    std::vector<const Ev*> ws;
    for (const auto& e : evs)
      if (e.kind == 'w') ws.push_back(&e);
    for (const Ev* w : ws)
      for (const auto& e : evs)
        if (&e != w && e.acq_ret < w->rel_call && w->acq_ret < e.rel_call) ++overlaps;
  }
  r["writer_overlaps"] = std::to_string(overlaps);
  r["max_readers"] = std::to_string(max_concurrent(evs, "r"));
  r["lost_writes"] = std::to_string(writes - Counter("", dir + "/counter").get());
  return r;
}

// ---- the limits ---------------------------------------------------------------
//
// ZooKeeper: the C client sending what dlock sends for a free permit or read
// lock on its blocking path: {create the name's container node, create the
// ephemeral-sequential queue node named by its kind ("-sem<N>-" or
// "-read-"), list the queue} in one round trip, then the delete. Every
// process has a name of its own, so the listing always grants.
using dlock::bench::ZkBatch;

void limit_zk(const Args& a, int k, const std::string& kind, const Barrier& bar, std::vector<Ev>& out) {
  auto [h, p] = host_port(a.url);
  const std::string hosts = h + ":" + std::to_string(p);
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  zhandle_t* zh = zookeeper_init(hosts.c_str(), nullptr, 10000, nullptr, nullptr, 0);
  for (int i = 0; i < 1000 && zoo_state(zh) != ZOO_CONNECTED_STATE; ++i) std::this_thread::sleep_for(10ms);
  if (zoo_state(zh) != ZOO_CONNECTED_STATE) throw std::runtime_error("no ZooKeeper session");
  const std::string base = "/recipes-limit-" + std::to_string(getppid());
  zoo_create(zh, base.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
  const std::string parent = base + "/" + a.name + "-" + std::to_string(k);
  const std::string child = parent + "/_c_0123456789abcdef0123456789abcdef-" + kind + "-";
  ZkBatch b;
  bar.ready_and_wait(k);
  const auto end = Clock::now() + std::chrono::duration<double>(a.seconds);
  while (Clock::now() < end) {
    Ev e;
    e.kind = kind == "read" ? 'r' : 's';
    e.acq_call = mono_ns();
    b.arm(3);
    zoo_acreate(
        zh, parent.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_CONTAINER,
        [](int, const char*, const void* d) { ZkBatch::of(d)->done(0, false); }, &b);
    zoo_acreate2(
        zh, child.c_str(), "owner", 5, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
        [](int rc, const char* path, const Stat*, const void* d) {
          if (rc == ZOK) ZkBatch::of(d)->node = path;
          ZkBatch::of(d)->done(rc, true);
        },
        &b);
    zoo_aget_children2(
        zh, parent.c_str(), 0,
        [](int rc, const String_vector*, const Stat*, const void* d) { ZkBatch::of(d)->done(rc, true); }, &b);
    if (b.wait() != ZOK) throw std::runtime_error("limit: create/list failed");
    e.acq_ret = e.rel_call = mono_ns();
    b.arm(1);
    zoo_adelete(
        zh, b.node.c_str(), -1, [](int rc, const void* d) { ZkBatch::of(d)->done(rc, true); }, &b);
    if (b.wait() != ZOK) throw std::runtime_error("limit: delete failed");
    out.push_back(e);
  }
  zookeeper_close(zh);
}

// Redis: the very commands dlock sent, replayed. One dlock client takes and
// gives back a permit (or a read lock) while a second connection MONITORs the
// server; the EVALSHA calls it sent (the acquire and the release script, with
// their keys and arguments) are replayed from a hiredis loop, with the name
// and the owner (set through LockOptions::owner, so it can be found)
// replaced by each process's own. dlock's renewals are not replayed (none
// falls due in a run shorter than the 10 s renewal period).
std::vector<std::string> parse_monitor(const std::string& line) {
  std::vector<std::string> out;
  for (std::size_t i = line.find('"'); i != std::string::npos && i < line.size(); i = line.find('"', i + 1)) {
    std::string arg;
    std::size_t j = i + 1;
    for (; j < line.size() && line[j] != '"'; ++j) {
      if (line[j] == '\\' && j + 1 < line.size()) {
        const char c = line[++j];
        if (c == 'x' && j + 2 < line.size()) {
          arg += static_cast<char>(std::stoi(line.substr(j + 1, 2), nullptr, 16));
          j += 2;
        } else if (c == 'n')
          arg += '\n';
        else if (c == 'r')
          arg += '\r';
        else if (c == 't')
          arg += '\t';
        else if (c == 'a')
          arg += '\a';
        else if (c == 'b')
          arg += '\b';
        else
          arg += c;
      } else {
        arg += line[j];
      }
    }
    out.push_back(arg);
    i = j;
  }
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

std::vector<std::vector<std::string>> capture_redis(const Args& a, bool shared_mode) {
  auto [h, p] = host_port(a.url);
  redisContext* mon = redisConnect(h.c_str(), p);
  if (mon == nullptr || mon->err) throw std::runtime_error("cannot connect to MONITOR");
  freeReplyObject(redisCommand(mon, "MONITOR"));
  const std::string name = "recipescapturename";
  try {
    auto client = dlock::Client::connect(a.url, quiet());
    const dlock::LockOptions o;  // the recipes make their own owner per hold
    if (a.workload == "SEM-limit") {
      dlock::Semaphore s(client, name, a.permits, o);
      s.acquire();
      (void)s.release();
    } else {
      dlock::SharedMutex m(client, name, o);
      if (shared_mode) {
        m.lock_shared();
        m.unlock_shared();
      } else {
        m.lock();
        m.unlock();
      }
    }
  } catch (const dlock::Error& e) {
    if (e.code() == dlock::Errc::invalid_argument) throw Refused(e.what());
    throw;
  }
  {  // marks the end of the capture
    redisContext* mark = redisConnect(h.c_str(), p);
    if (mark == nullptr || mark->err) throw std::runtime_error("cannot connect to mark the capture");
    freeReplyObject(redisCommand(mark, "ECHO recipescaptureend"));
    redisFree(mark);
  }
  std::vector<std::vector<std::string>> cmds;
  for (;;) {
    void* raw = nullptr;
    if (redisGetReply(mon, &raw) != REDIS_OK || raw == nullptr) throw std::runtime_error("MONITOR read failed");
    auto* r = static_cast<redisReply*>(raw);
    const std::string line(r->str, r->len);
    freeReplyObject(r);
    if (line.find("recipescaptureend") != std::string::npos) break;
    auto args = parse_monitor(line);
    if (args.empty()) continue;
    std::string cmd = args[0];
    std::transform(cmd.begin(), cmd.end(), cmd.begin(), ::toupper);
    if ((cmd == "EVALSHA" || cmd == "EVAL") && line.find(name) != std::string::npos) cmds.push_back(args);
  }
  redisFree(mon);
  if (cmds.size() < 2) throw std::runtime_error("captured fewer than two scripts");
  // Keep the first acquire and the last release (the pair), the hold's
  // owner (the acquire's ARGV[1], "<owner>/<grant>") marked for the limit
  // to replace with its own.
  std::vector<std::vector<std::string>> pair = {cmds.front(), cmds.back()};
  const auto& acquire = pair.front();
  const std::size_t argv1 = 3 + static_cast<std::size_t>(std::stoul(acquire.at(2)));
  const std::string owner = acquire.at(argv1).substr(0, acquire.at(argv1).find('/'));
  for (auto& cmd : pair)
    for (auto& s : cmd) s = replace_all(s, owner, "recipescaptureowner");
  return pair;
}

void limit_redis(const Args& a, int k, const std::vector<std::vector<std::string>>& pair, const Barrier& bar,
                 std::vector<Ev>& out, char kind) {
  auto [h, p] = host_port(a.url);
  redisContext* c = redisConnect(h.c_str(), p);
  if (c == nullptr || c->err) throw std::runtime_error("cannot connect for the limit");
  const std::string name = a.name + "-" + std::to_string(getppid()) + "-" + std::to_string(k);
  const std::string owner = "limitowner" + std::to_string(k);
  std::vector<std::vector<std::string>> cmds;
  for (const auto& cmd : pair) {
    std::vector<std::string> args;
    for (const auto& s : cmd)
      args.push_back(replace_all(replace_all(s, "recipescapturename", name), "recipescaptureowner", owner));
    cmds.push_back(std::move(args));
  }
  // The reply, flattened to text: the first pair's replies are kept, and
  // every later pair must get the same ones (the same grant, the same release).
  std::function<std::string(const redisReply*)> text = [&](const redisReply* r) -> std::string {
    switch (r->type) {
      case REDIS_REPLY_INTEGER:
        return std::to_string(r->integer);
      case REDIS_REPLY_ARRAY: {
        std::string flat = "[";
        for (std::size_t i = 0; i < r->elements; ++i) flat += (i ? "," : "") + text(r->element[i]);
        return flat + "]";
      }
      case REDIS_REPLY_NIL:
        return "nil";
      default:
        return std::string(r->str, r->len);
    }
  };
  auto send = [&](const std::vector<std::string>& args) {
    std::vector<const char*> v;
    std::vector<std::size_t> len;
    for (const auto& s : args) {
      v.push_back(s.data());
      len.push_back(s.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(v.size()), v.data(), len.data()));
    if (r == nullptr || r->type == REDIS_REPLY_ERROR)
      throw std::runtime_error("limit: " + std::string(r ? std::string(r->str, r->len) : "connection failed"));
    std::string t = text(r);
    freeReplyObject(r);
    return t;
  };
  // Fences grow from pair to pair: compare what the replies say (an array's
  // first element: granted, busy, released...), not the fences.
  auto shape = [](const std::string& t) { return t.substr(0, t.find(',')); };
  const std::string want_acq = shape(send(cmds[0])), want_rel = shape(send(cmds[1]));
  if (std::getenv("DLOCK_BENCH_DEBUG"))
    std::fprintf(stderr, "limit %d: acquire %s -> %s, release -> %s\n", k, cmds[0][1].c_str(), want_acq.c_str(),
                 want_rel.c_str());
  bar.ready_and_wait(k);
  const auto end = Clock::now() + std::chrono::duration<double>(a.seconds);
  while (Clock::now() < end) {
    Ev e;
    e.kind = kind;
    e.acq_call = mono_ns();
    if (shape(send(cmds[0])) != want_acq) throw std::runtime_error("limit: an acquire was not granted as the first");
    e.acq_ret = e.rel_call = mono_ns();
    if (shape(send(cmds[1])) != want_rel) throw std::runtime_error("limit: a release was not answered as the first");
    out.push_back(e);
  }
  redisFree(c);
}

Result limit(const Args& a, const std::string& dir) {
  const bool semaphore = a.workload == "SEM-limit";
  std::vector<std::vector<std::string>> read_pair, write_pair;
  if (is_redis(a.url)) {
    read_pair = capture_redis(a, true);
    if (!semaphore) write_pair = capture_redis(a, false);
  } else if (!is_zk(a.url)) {
    throw std::runtime_error("no limit for this backend: " + backend_of(a.url));
  }
  Barrier bar{dir, a.procs};
  auto evs = run_procs(a, dir, [&](int k, std::vector<Ev>& out) {
    // RW: the readers' fraction of processes does reads, the rest writes.
    const bool reads = semaphore || k < static_cast<int>(a.readers * a.procs + 0.5);
    const char kind = semaphore ? 's' : reads ? 'r' : 'w';
    if (is_zk(a.url))
      limit_zk(a, k, semaphore ? "sem" + std::to_string(a.permits) : reads ? "read" : "lock", bar, out);
    else
      limit_redis(a, k, reads ? read_pair : write_pair, bar, out, kind);
    for (auto& e : out) e.kind = kind;
    write_events(dir, k, out);
  });
  Result r = base(a);
  r["library"] = is_zk(a.url) ? "\"zookeeper-c-limit\"" : "\"hiredis-limit\"";
  r["pairs"] = std::to_string(evs.size());
  r["pairs_per_s"] = num(static_cast<double>(evs.size()) / a.seconds);
  r["ops_per_s"] = r["pairs_per_s"];
  if (semaphore)
    r["permits"] = std::to_string(a.permits);
  else
    r["readers_fraction"] = num(a.readers);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--url")
      a.url = v;
    else if (k == "--workload")
      a.workload = v;
    else if (k == "--fair")
      a.fair = v == "1" || v == "true";
    else if (k == "--procs")
      a.procs = std::max(1, std::stoi(v));
    else if (k == "--permits")
      a.permits = static_cast<unsigned>(std::max(1, std::stoi(v)));
    else if (k == "--readers")
      a.readers = std::stod(v);
    else if (k == "--seconds")
      a.seconds = std::stod(v);
    else if (k == "--name")
      a.name = v;
    else if (k == "--out")
      a.out = v;
    else
      a.url.clear(), i = argc;
  }
  if (a.url.empty() || a.out.empty()) {
    std::cerr << "usage: dlock-recipes-bench --url URL --workload W3|SEM|RW|SEM-limit|RW-limit [--fair 0|1]\n"
                 "       [--procs 8] [--permits 3] [--readers 0.9] [--seconds 5] [--name NAME] --out FILE\n";
    return 64;
  }
  if (a.name.empty()) a.name = "recipes-" + a.workload + "-" + std::to_string(getpid());
  char tmpl[] = "/tmp/dlock-recipes-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  int rc = 0;
  try {
    Result r;
    if (a.workload == "W3")
      r = w3(a, dir);
    else if (a.workload == "SEM")
      r = sem(a, dir);
    else if (a.workload == "RW")
      r = rw(a, dir);
    else if (a.workload == "SEM-limit" || a.workload == "RW-limit")
      r = limit(a, dir);
    else
      throw std::runtime_error("unknown workload " + a.workload);
    const std::string json = dlock::bench::json_object(r);
    std::ofstream(a.out) << json << '\n';
    std::cout << json << '\n';
    if (r.count("lost_updates") && r["lost_updates"] != "0") rc = 1;
    if (r.count("writer_overlaps") && r["writer_overlaps"] != "0") rc = 1;
    if (r.count("max_holders") && std::stoul(r["max_holders"]) > a.permits) rc = 1;
  } catch (const Refused& e) {
    // Not offered by this backend (in this build): a result that says so.
    std::string why;
    for (char c : std::string(e.what())) why += c == '"' || c == '\\' ? '\'' : c;
    const std::string json = "{\"library\": \"dlock\", \"backend\": \"" + backend_of(a.url) + "\", \"workload\": \"" +
                             a.workload + "\", \"fair\": " + (a.fair ? "true" : "false") + ", \"refused\": \"" + why +
                             "\"}";
    std::ofstream(a.out) << json << '\n';
    std::cout << json << '\n';
  } catch (const std::exception& e) {
    std::cerr << "dlock-recipes-bench: " << e.what() << '\n';
    rc = 1;
  }
  fs::remove_all(dir);
  return rc;
}

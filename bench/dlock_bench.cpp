// dlock-bench: end-to-end workloads against a real Redis, one per run,
// writing one JSON result (and, for W3, raw critical-section events that the
// report script analyses the same way for every library).
//
//   W1  one client, sequential acquire+release (--keys distinct|same)
//   W2  one process, --tasks asynchronous tasks on distinct keys, one Client
//   W3  --procs processes, one key, critical section = GET/SET counter
//   W4  --locks leases held under the watchdog for 3 renewal periods:
//       renewal round trips per period (INFO commandstats) and client CPU
//   W6  memory per held lock: client RSS and Redis used_memory
//   W5            W1 on distinct keys, recording the number of masters in the
//                 --url (redis:// 1, redlock:// N)
//   W5-contended  W3 over the --url, recording the number of masters
//   WAIT          W1 on distinct keys, recording the URL's wait_replicas
//                 (WAIT mode, turned on by the URL's query parameters)
//   W1-limit, W2-limit  the same pairs by minimal hiredis loops; with a
//                 redis-cluster:// URL they route each key to its master;
//                 W1-limit over TLS for rediss:// (tls_limit.hpp) and with
//                 the grant's WAIT for ?wait_replicas=N
//
// A redis-cluster:// URL marks the result "topology": "cluster"; --masters N
// records the cluster's size, --data-port where W3's counter lives.
//
// The lock calls use only the public API; the protected resource and the
// server statistics go through a plain hiredis connection.
#include <hiredis/hiredis.h>  // the W1-limit loop: the minimal client, by definition
#include <sys/resource.h>
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
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/sync_redis.hpp"
#include "harness.hpp"
#include "limit_routes.hpp"
#include "tls_limit.hpp"

namespace {

using dlock::bench::Clock;
using dlock::bench::json_object;
using dlock::bench::mono_ns;
using dlock::bench::num;
using namespace std::chrono_literals;

struct Args {
  std::string url = "redis://127.0.0.1:6379";
  std::string workload = "W1";
  std::string api = "lease";  // W1: lease (acquire/release) or mutex (Mutex + std::unique_lock)
  std::string keys = "distinct";
  double seconds = 5;
  int procs = 8;
  int tasks = 64;
  int locks = 10000;
  int renew_ms = 10000;
  std::string out;
  std::string events;
  bool describe = true;  // --describe off: grants store no holder description
  int data_port = 0;     // W3's counter: this server's port (0: the URL's last node)
  int masters = 0;       // recorded as "masters" when > 0 (the cluster rows)
};

// The port of the (last) node in the URL: where the application's data goes.
int port_of(const std::string& url) {
  auto colon = url.rfind(':');
  return std::stoi(url.substr(colon + 1));
}

// Masters named by the URL: 1 for redis://, N for redlock://h1,...,hN.
int nodes_of(const std::string& url) {
  if (url.rfind("redlock", 0) != 0) return 1;
  auto start = url.find("://") + 3;
  auto end = url.find_first_of("/?", start);
  std::string hosts = url.substr(start, end == std::string::npos ? std::string::npos : end - start);
  return 1 + static_cast<int>(std::count(hosts.begin(), hosts.end(), ','));
}

// The URL's wait_replicas query parameter (0 if absent).
int wait_replicas_of(const std::string& url) {
  auto q = url.find('?');
  if (q == std::string::npos) return 0;
  std::string query = "&" + url.substr(q + 1);
  auto p = query.find("&wait_replicas=");
  return p == std::string::npos ? 0 : std::stoi(query.substr(p + 15));
}

// The application's own Redis access (data and statistics), not the lock.
class Plain {
 public:
  explicit Plain(int port) : conn_("127.0.0.1", static_cast<std::uint16_t>(port), std::chrono::seconds(10)) {
    std::string why;
    if (!conn_.connect(&why))
      throw std::runtime_error("cannot connect to Redis on port " + std::to_string(port) + ": " + why);
  }
  std::string cmd(const std::vector<std::string>& args) {
    const dlock::tools::Reply r = conn_.cmd(args);
    if (r.status != dlock::tools::Reply::Status::ok) throw std::runtime_error("Redis connection failed: " + r.failure);
    return r.is_nil ? std::string() : r.text();  // a missing key reads as empty
  }
  // One field of INFO <section>.
  std::string info(const std::string& section, const std::string& field) {
    std::istringstream in(cmd({"INFO", section}));
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.rfind(field + ":", 0) == 0) return line.substr(field.size() + 1);
    }
    return {};
  }
  // Calls of a command so far (INFO commandstats "calls=").
  long long calls(const std::string& command) {
    std::string v = info("commandstats", "cmdstat_" + command);
    auto p = v.find("calls=");
    return p == std::string::npos ? 0 : std::stoll(v.substr(p + 6));
  }

 private:
  dlock::tools::SyncRedis conn_;
};

// What the pairs cost the Redis server of a redis:// URL (one server on
// this machine, as W4 and W6 read it), read through INFO before and after:
// its CPU time (user + sys, every thread of it) and the time its top-level
// commands took (commandstats: the scripts with what they call, SET).
// Elsewhere (TLS, Cluster, Redlock, a password) nothing is recorded.
class ServerCost {
 public:
  explicit ServerCost(const std::string& url) {
    if (url.rfind("redis://", 0) != 0 || url.find('@') != std::string::npos) return;
    try {
      plain_.emplace(port_of(url));
      cpu0_ = cpu_s();
      cmd0_ = command_us();
    } catch (const std::exception&) {
      plain_.reset();
    }
  }
  void add_to(std::map<std::string, std::string>& r, long long pairs) {
    if (!plain_ || pairs <= 0) return;
    try {
      const auto n = static_cast<double>(pairs);
      r["server_cpu_us_per_pair"] = num((cpu_s() - cpu0_) * 1e6 / n);
      r["server_cmd_us_per_pair"] = num((command_us() - cmd0_) / n);
    } catch (const std::exception&) {
    }
  }

 private:
  double cpu_s() {
    return std::stod(plain_->info("cpu", "used_cpu_user")) + std::stod(plain_->info("cpu", "used_cpu_sys"));
  }
  double command_us() {
    double us = 0;
    for (const char* c : {"evalsha", "eval", "set"}) {
      std::string v = plain_->info("commandstats", std::string("cmdstat_") + c);
      if (auto p = v.find("usec="); p != std::string::npos) us += std::stod(v.substr(p + 5));
    }
    return us;
  }
  std::optional<Plain> plain_;
  double cpu0_ = 0, cmd0_ = 0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

std::string q(const std::string& s) { return "\"" + s + "\""; }

// This process's CPU time and time spent runnable but waiting for a CPU,
// in ns, summed over its threads (/proc/self/task/*/schedstat).
struct SchedTimes {
  double cpu_ns = 0;
  double wait_ns = 0;
};
SchedTimes sched_times() {
  SchedTimes t;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(task.path() / "schedstat");
    double cpu = 0, wait = 0;
    if (in >> cpu >> wait) {
      t.cpu_ns += cpu;
      t.wait_ns += wait;
    }
  }
  return t;
}

// The fields W1 and W2 report: count, time, rate and latency percentiles;
// with `since` (sched_times() at the start), the client's CPU time and its
// wait for a CPU per pair: under load they tell a client that works more
// from one the machine delays.
void pair_stats(std::map<std::string, std::string>& r, long long pairs, double secs, const std::vector<double>& lat_us,
                const std::optional<SchedTimes>& since = std::nullopt) {
  r["pairs"] = std::to_string(pairs);
  r["seconds"] = num(secs);
  r["pairs_per_s"] = num(static_cast<double>(pairs) / secs);
  r["p50_us"] = num(percentile(lat_us, 0.50));
  r["p99_us"] = num(percentile(lat_us, 0.99));
  if (since && pairs > 0) {
    const SchedTimes now = sched_times();
    r["cpu_us_per_pair"] = num((now.cpu_ns - since->cpu_ns) / 1000.0 / static_cast<double>(pairs));
    r["cpu_wait_us_per_pair"] = num((now.wait_ns - since->wait_ns) / 1000.0 / static_cast<double>(pairs));
  }
}

dlock::Client connect(const Args& a) {
  dlock::ClientOptions o;
  o.command_timeout = 5000ms;
  o.describe_holder = a.describe;
  return dlock::Client::connect(a.url, o);
}

std::map<std::string, std::string> base(const Args& a) {
  return {{"library", q("dlock")},
          {"settings", q(a.describe ? "default" : "describe_holder off")},
          {"workload", q(a.workload)},
          {"version", q(DLOCK_VERSION_STRING)}};
}

// Sequential pairs on one client, through acquire()/release() (--api lease)
// or the README's first example, a Mutex with std::unique_lock (--api mutex).
std::map<std::string, std::string> w1(const Args& a) {
  auto client = connect(a);
  std::vector<double> lat_us;
  lat_us.reserve(200000);
  const auto end = Clock::now() + std::chrono::duration<double>(a.seconds);
  const auto start = Clock::now();
  long long i = 0;
  std::optional<dlock::Mutex> same;
  if (a.api == "mutex" && a.keys == "same") same.emplace(client, "bench:w1:same");
  ServerCost server(a.url);
  const SchedTimes sched = sched_times();
  while (Clock::now() < end) {
    std::string name = a.keys == "same" ? std::string("bench:w1:same") : "bench:w1:" + std::to_string(i);
    auto t0 = Clock::now();
    if (a.api == "mutex") {
      std::optional<dlock::Mutex> fresh;
      dlock::Mutex& m = same ? *same : fresh.emplace(client, name);
      { std::unique_lock lk(m); }
      if (auto s = m.last_release_status(); !s.ok()) throw dlock::Error(s);
    } else {
      auto lease = client.try_acquire(name);
      if (!lease.ok()) throw dlock::Error(lease.status());
      if (auto s = lease->release(); !s.ok()) throw dlock::Error(s);
    }
    lat_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    ++i;
  }
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  auto r = base(a);
  r["api"] = q(a.api);
  r["keys"] = q(a.keys);
  if (a.workload == "W5") r["nodes"] = std::to_string(nodes_of(a.url));
  if (a.workload == "WAIT") r["wait_replicas"] = std::to_string(wait_replicas_of(a.url));
  pair_stats(r, i, secs, lat_us, sched);
  server.add_to(r, i);
  return r;
}

// --tasks concurrent tasks on one client, distinct keys: throughput through
// the pipeline. Each task is a chain of asynchronous calls (acquire, then
// release, then the next acquire), so 64 tasks need no 64 threads.
struct W2Task : std::enable_shared_from_this<W2Task> {
  dlock::Client* client;
  int id;
  Clock::time_point end;
  long long done = 0;
  std::vector<double> lat_us;
  std::promise<void>* finished;
  void next() {
    if (Clock::now() >= end) {
      finished->set_value();
      return;
    }
    auto self = shared_from_this();
    auto t0 = Clock::now();
    client->async_acquire(
        "bench:w2:" + std::to_string(id) + ":" + std::to_string(done), std::chrono::milliseconds(0), {},
        [self, t0](dlock::Result<dlock::Lease> r) {
          if (!r.ok()) throw dlock::Error(r.status());
          self->client->async_release(std::move(r.value()), [self, t0](dlock::Status s) {
            if (!s.ok()) throw dlock::Error(s);
            self->lat_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
            ++self->done;
            self->next();
          });
        });
  }
};

std::map<std::string, std::string> w2(const Args& a) {
  auto client = connect(a);
  const auto start = Clock::now();
  std::vector<std::shared_ptr<W2Task>> tasks;
  std::vector<std::promise<void>> finished(a.tasks);
  for (int t = 0; t < a.tasks; ++t) {
    auto task = std::make_shared<W2Task>();
    task->client = &client;
    task->id = t;
    task->end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));
    task->finished = &finished[t];
    tasks.push_back(task);
  }
  for (auto& t : tasks) t->next();
  for (auto& f : finished) f.get_future().wait();
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  long long pairs = 0;
  std::vector<double> all;
  for (auto& t : tasks) {
    pairs += t->done;
    all.insert(all.end(), t->lat_us.begin(), t->lat_us.end());
  }
  auto r = base(a);
  r["tasks"] = std::to_string(a.tasks);
  pair_stats(r, pairs, secs, all);
  return r;
}

// Contended: processes forked before any client exists; each has its own.
std::map<std::string, std::string> w3(const Args& a, bool with_lock) {
  const int port = a.data_port > 0 ? a.data_port : port_of(a.url);
  const std::string counter = "bench:w3:ctr";
  {
    Plain p(port);
    p.cmd({"DEL", counter});
  }
  std::vector<pid_t> kids;
  for (int k = 0; k < a.procs; ++k) {
    pid_t pid = fork();
    if (pid == 0) {
      int rc = 0;
      try {
        auto client = connect(a);
        Plain data(port);
        dlock::Mutex m(client, "bench:w3");
        std::ofstream ev(a.events + "." + std::to_string(k));
        const auto end = Clock::now() + std::chrono::duration<double>(a.seconds);
        while (Clock::now() < end) {
          long long acq_call = mono_ns();
          if (with_lock) m.lock();
          long long acq_ret = mono_ns();
          std::string v = data.cmd({"GET", counter});
          data.cmd({"SET", counter, std::to_string((v.empty() ? 0 : std::stoll(v)) + 1)});
          long long rel_call = mono_ns();
          if (with_lock) m.unlock();
          long long rel_ret = mono_ns();
          ev << "{\"pid\": " << getpid() << ", \"acq_call\": " << acq_call << ", \"acq_ret\": " << acq_ret
             << ", \"rel_call\": " << rel_call << ", \"rel_ret\": " << rel_ret << "}\n";
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "dlock-bench W3 worker: %s\n", e.what());
        rc = 1;
      }
      std::fflush(nullptr);
      _exit(rc);
    }
    kids.push_back(pid);
  }
  int failures = 0;
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ++failures;
  }
  // Merge the per-process event files.
  long long cs = 0;
  {
    std::ofstream merged(a.events);
    for (int k = 0; k < a.procs; ++k) {
      std::string part = a.events + "." + std::to_string(k);
      std::ifstream in(part);
      std::string line;
      while (std::getline(in, line)) {
        merged << line << '\n';
        ++cs;
      }
      std::remove(part.c_str());
    }
  }
  Plain p(port);
  std::string v = p.cmd({"GET", counter});
  long long final_value = v.empty() ? 0 : std::stoll(v);
  auto r = base(a);
  r["procs"] = std::to_string(a.procs);
  if (a.workload == "W5-contended") r["nodes"] = std::to_string(nodes_of(a.url));
  r["seconds"] = num(a.seconds);
  r["critical_sections"] = std::to_string(cs);
  r["acquire_failures"] = "0";
  r["worker_failures"] = std::to_string(failures);
  r["counter"] = std::to_string(final_value);
  r["counter_ok"] = final_value == cs ? "true" : "false";
  r["events"] = q(a.events);
  return r;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

long long rss_bytes() {
  std::ifstream in("/proc/self/statm");
  long long pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

std::vector<dlock::Lease> hold_many(dlock::Client& client, int n, const dlock::LockOptions& o, const std::string& tag) {
  std::vector<dlock::Lease> leases;
  leases.reserve(static_cast<std::size_t>(n));
  // Acquire concurrently through the pipeline: a few threads suffice.
  std::mutex mu;
  std::vector<std::thread> ts;
  constexpr int kThreads = 16;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = t; i < n; i += kThreads) {
        auto l = client.try_acquire("bench:" + tag + ":" + std::to_string(i), o);
        if (!l.ok()) throw dlock::Error(l.status());
        std::lock_guard lk(mu);
        leases.push_back(std::move(l.value()));
      }
    });
  }
  for (auto& th : ts) th.join();
  return leases;
}

// Renewal cost: round trips per period and client CPU while idle-holding.
std::map<std::string, std::string> w4(const Args& a) {
  auto client = connect(a);
  Plain stats(port_of(a.url));
  dlock::LockOptions o;
  o.renew_interval = std::chrono::milliseconds(a.renew_ms);
  o.watchdog_lease = o.renew_interval * 3;
  auto leases = hold_many(client, a.locks, o, "w4");
  // Window: from just after one renewal tick to half a period after the
  // third next one, so it holds exactly three ticks.
  const auto period = std::chrono::milliseconds(a.renew_ms);
  auto trips_before = client.stats().renewal_round_trips;
  const auto give_up = Clock::now() + 3 * period;
  while (client.stats().renewal_round_trips == trips_before && Clock::now() < give_up) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(period / 4);  // let that tick's batch finish
  long long evalsha0 = stats.calls("evalsha"), eval0 = stats.calls("eval");
  auto trips0 = client.stats().renewal_round_trips;
  double cpu0 = cpu_seconds();
  auto t0 = Clock::now();
  std::this_thread::sleep_for(3 * period);
  double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  double cpu = cpu_seconds() - cpu0;
  long long calls = stats.calls("evalsha") - evalsha0 + stats.calls("eval") - eval0;
  auto trips = client.stats().renewal_round_trips - trips0;
  bool all_held = client.stats().leases_lost == 0;
  auto r = base(a);
  r["locks"] = std::to_string(a.locks);
  r["renew_interval_ms"] = std::to_string(a.renew_ms);
  r["periods"] = "3";
  r["server_script_calls"] = std::to_string(calls);
  r["round_trips_per_period"] = num(static_cast<double>(calls) / 3.0);
  r["client_renewal_round_trips"] = std::to_string(trips);
  r["client_cpu_percent"] = num(100.0 * cpu / wall);
  r["all_still_held"] = all_held ? "true" : "false";
  return r;
}

// Memory per held lock, client and server.
std::map<std::string, std::string> w6(const Args& a) {
  auto client = connect(a);
  Plain stats(port_of(a.url));
  stats.cmd({"FLUSHALL"});
  // Warm up allocator and connection buffers first.
  { auto warm = hold_many(client, 100, {}, "w6warm"); }
  long long used0 = std::stoll(stats.info("memory", "used_memory"));
  long long rss0 = rss_bytes();
  auto leases = hold_many(client, a.locks, {}, "w6");
  long long rss1 = rss_bytes();
  long long used1 = std::stoll(stats.info("memory", "used_memory"));
  auto r = base(a);
  r["locks"] = std::to_string(a.locks);
  r["client_bytes_per_lock"] = num(static_cast<double>(rss1 - rss0) / a.locks);
  r["redis_bytes_per_lock"] = num(static_cast<double>(used1 - used0) / a.locks);
  r["note"] = q("client: RSS delta; redis: used_memory delta (the lock hash; fences share one counter)");
  return r;
}

// The limit: a minimal blocking client doing the same two round trips as a
// lock pair (hiredis: SET key token NX PX, then compare-and-delete by
// EVALSHA), nothing else. Reported as library "hiredis-limit".
// The compare-and-delete every limit loop releases with, loaded on each node.
const char* const kCad = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";
std::string load_cad(const dlock::bench::LimitRoutes& routes) {
  std::string sha;
  for (redisContext* c : routes.all()) {
    auto* loaded = static_cast<redisReply*>(redisCommand(c, "SCRIPT LOAD %s", kCad));
    if (loaded == nullptr || loaded->type != REDIS_REPLY_STRING) throw std::runtime_error("SCRIPT LOAD failed");
    sha.assign(loaded->str, loaded->len);
    freeReplyObject(loaded);
  }
  return sha;
}
const char* const kLimitToken = "0123456789abcdef0123456789abcdef";

// A rediss:// URL: the same loop over TlsLimitConn. A URL with
// wait_replicas: the grant's WAIT goes in the grant's write, as dlock's.
std::map<std::string, std::string> w1_limit(const Args& a) {
  const int wait = wait_replicas_of(a.url);
  std::string wait_ms = "100";  // dlock's default wait_timeout
  if (auto p = a.url.find("wait_timeout_ms="); p != std::string::npos)
    wait_ms = a.url.substr(p + 16, a.url.find('&', p) - p - 16);
  std::unique_ptr<dlock::bench::LimitRoutes> routes;
  std::unique_ptr<dlock::bench::TlsLimitConn> tls;
  std::string sha;
  if (a.url.rfind("rediss://", 0) == 0) {
    tls = std::make_unique<dlock::bench::TlsLimitConn>(a.url);
    auto loaded = tls->roundtrip({{"SCRIPT", "LOAD", kCad}});
    if (loaded[0]->type != REDIS_REPLY_STRING) throw std::runtime_error("SCRIPT LOAD failed");
    sha.assign(loaded[0]->str, loaded[0]->len);
  } else {
    routes = std::make_unique<dlock::bench::LimitRoutes>(a.url);
    sha = load_cad(*routes);
  }
  auto check = [&](const redisReply* set, const redisReply* waited) {
    if (set == nullptr || set->type != REDIS_REPLY_STATUS) throw std::runtime_error("SET NX failed");
    if (wait > 0 && (waited == nullptr || waited->type != REDIS_REPLY_INTEGER || waited->integer < wait))
      throw std::runtime_error("WAIT: not acknowledged");
  };
  auto check_released = [](const redisReply* r) {
    if (r == nullptr || r->type != REDIS_REPLY_INTEGER || r->integer != 1) throw std::runtime_error("release failed");
  };
  auto pair = [&](const std::string& name) {
    if (tls) {
      std::vector<std::vector<std::string>> grant{{"SET", name, kLimitToken, "NX", "PX", "30000"}};
      if (wait > 0) grant.push_back({"WAIT", std::to_string(wait), wait_ms});
      auto r = tls->roundtrip(grant);
      check(r[0].get(), wait > 0 ? r[1].get() : nullptr);
      check_released(tls->roundtrip({{"EVALSHA", sha, "1", name, kLimitToken}})[0].get());
      return;
    }
    redisContext* c = routes->for_key(name);
    if (wait == 0) {
      dlock::bench::ReplyPtr r1(
          static_cast<redisReply*>(redisCommand(c, "SET %s %s NX PX 30000", name.c_str(), kLimitToken)),
          freeReplyObject);
      check(r1.get(), nullptr);
    } else {
      redisAppendCommand(c, "SET %s %s NX PX 30000", name.c_str(), kLimitToken);
      redisAppendCommand(c, "WAIT %d %s", wait, wait_ms.c_str());
      void* r1 = nullptr;
      void* r2 = nullptr;
      if (redisGetReply(c, &r1) != REDIS_OK || redisGetReply(c, &r2) != REDIS_OK)
        throw std::runtime_error("SET NX + WAIT failed");
      dlock::bench::ReplyPtr set(static_cast<redisReply*>(r1), freeReplyObject);
      dlock::bench::ReplyPtr waited(static_cast<redisReply*>(r2), freeReplyObject);
      check(set.get(), waited.get());
    }
    dlock::bench::ReplyPtr r2(
        static_cast<redisReply*>(redisCommand(c, "EVALSHA %s 1 %s %s", sha.c_str(), name.c_str(), kLimitToken)),
        freeReplyObject);
    check_released(r2.get());
  };
  std::vector<double> lat_us;
  lat_us.reserve(200000);
  const auto end = Clock::now() + std::chrono::duration<double>(a.seconds);
  const auto start = Clock::now();
  ServerCost server(a.url);
  const SchedTimes sched = sched_times();
  long long i = 0;
  while (Clock::now() < end) {
    std::string name = a.keys == "same" ? std::string("bench:w1:same") : "bench:w1:" + std::to_string(i);
    auto t0 = Clock::now();
    pair(name);
    lat_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    ++i;
  }
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  auto r = base(a);
  r["library"] = q("hiredis-limit");
  r["workload"] = q("W1");
  r["keys"] = q(a.keys);
  pair_stats(r, i, secs, lat_us, sched);
  server.add_to(r, i);
  return r;
}

// W2's limit: --tasks pairs at a time on distinct keys, as W2's tasks, by
// one thread with one blocking connection per master: the batch's SET NX PX
// commands pipelined to their masters (all written before any is read), then
// its compare-and-deletes the same way. As many commands and round trips as
// W2, with the most pipelining a client can have; each pair's latency is its
// batch's.
std::map<std::string, std::string> w2_limit(const Args& a) {
  const dlock::bench::LimitRoutes routes(a.url);
  const std::string sha = load_cad(routes);
  std::vector<double> lat_us;
  lat_us.reserve(2000000);
  std::vector<std::string> names(static_cast<std::size_t>(a.tasks));
  std::vector<redisContext*> conns(names.size());
  const auto end = Clock::now() + std::chrono::duration<double>(a.seconds);
  const auto start = Clock::now();
  long long batch = 0, pairs = 0;
  auto read_all = [&](int type, const char* what) {
    routes.flush_all();
    for (redisContext* c : conns) {
      void* raw = nullptr;
      if (redisGetReply(c, &raw) != REDIS_OK || raw == nullptr) throw std::runtime_error(what);
      auto* reply = static_cast<redisReply*>(raw);
      const bool ok = reply->type == type && (type != REDIS_REPLY_INTEGER || reply->integer == 1);
      freeReplyObject(reply);
      if (!ok) throw std::runtime_error(what);
    }
  };
  while (Clock::now() < end) {
    auto t0 = Clock::now();
    for (std::size_t t = 0; t < names.size(); ++t) {
      names[t] = "bench:w2:" + std::to_string(t) + ":" + std::to_string(batch);
      conns[t] = routes.for_key(names[t]);
      redisAppendCommand(conns[t], "SET %s %s NX PX 30000", names[t].c_str(), kLimitToken);
    }
    read_all(REDIS_REPLY_STATUS, "SET NX failed");
    for (std::size_t t = 0; t < names.size(); ++t)
      redisAppendCommand(conns[t], "EVALSHA %s 1 %s %s", sha.c_str(), names[t].c_str(), kLimitToken);
    read_all(REDIS_REPLY_INTEGER, "release failed");
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    lat_us.insert(lat_us.end(), names.size(), us);
    pairs += static_cast<long long>(names.size());
    ++batch;
  }
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  auto r = base(a);
  r["library"] = q("hiredis-limit");
  r["workload"] = q("W2");
  r["tasks"] = std::to_string(a.tasks);
  pair_stats(r, pairs, secs, lat_us);
  return r;
}

// An idle client: connected, holding one lock under the watchdog, nothing
// else to do for --seconds. Its CPU use should be about zero (no spinning).
std::map<std::string, std::string> idle(const Args& a) {
  auto client = connect(a);
  auto lease = client.try_acquire("bench:idle");
  if (!lease.ok()) throw dlock::Error(lease.status());
  const double cpu0 = cpu_seconds();
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(a.seconds));
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = cpu_seconds() - cpu0;
  auto r = base(a);
  r["seconds"] = num(wall);
  r["client_cpu_percent"] = num(100.0 * cpu / wall);
  return r;
}

int usage() {
  std::cerr << "usage: dlock-bench --url URL --workload W1|W2|W3|W3-nolock|W4|W5|W5-contended|W6|WAIT\n"
               "                   [--keys distinct|same] [--api lease|mutex] (W1)\n"
               "       W1-limit: the same pairs by a minimal hiredis loop (SET NX PX + EVALSHA); over\n"
               "       TLS for rediss://, with the grant's WAIT for ?wait_replicas=N\n"
               "       W2-limit: --tasks such pairs at a time, pipelined to their masters\n"
               "       (redis:// or redis-cluster://: the limits route each key to its slot's master)\n"
               "                   [--data-port P] (W3: the counter's server) [--masters N] (recorded)\n"
               "       IDLE: CPU use of a client holding one lock and doing nothing\n"
               "                   [--seconds S] [--procs N] [--tasks N] [--locks N] [--renew-ms MS]\n"
               "                   [--describe on|off] (off: grants store no holder description)\n"
               "                   --out FILE [--events FILE]\n";
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--url")
      a.url = v;
    else if (k == "--workload")
      a.workload = v;
    else if (k == "--keys")
      a.keys = v;
    else if (k == "--api")
      a.api = v;
    else if (k == "--seconds")
      a.seconds = std::stod(v);
    else if (k == "--procs")
      a.procs = std::stoi(v);
    else if (k == "--tasks")
      a.tasks = std::stoi(v);
    else if (k == "--locks")
      a.locks = std::stoi(v);
    else if (k == "--renew-ms")
      a.renew_ms = std::stoi(v);
    else if (k == "--out")
      a.out = v;
    else if (k == "--events")
      a.events = v;
    else if (k == "--data-port")
      a.data_port = std::stoi(v);
    else if (k == "--masters")
      a.masters = std::stoi(v);
    else if (k == "--describe" && (v == "on" || v == "off"))
      a.describe = v == "on";
    else
      return usage();
  }
  if (a.workload == "W5" || a.workload == "WAIT") a.keys = "distinct";
  const bool contended = a.workload.rfind("W3", 0) == 0 || a.workload == "W5-contended";
  if (a.out.empty() || (contended && a.events.empty())) return usage();
  try {
    std::map<std::string, std::string> r;
    if (a.workload == "W1" || a.workload == "W5" || a.workload == "WAIT")
      r = w1(a);
    else if (a.workload == "W1-limit")
      r = w1_limit(a);
    else if (a.workload == "W2-limit")
      r = w2_limit(a);
    else if (a.workload == "IDLE")
      r = idle(a);
    else if (a.workload == "W2")
      r = w2(a);
    else if (a.workload == "W3" || a.workload == "W5-contended")
      r = w3(a, true);
    else if (a.workload == "W3-nolock")
      r = w3(a, false);
    else if (a.workload == "W4")
      r = w4(a);
    else if (a.workload == "W6")
      r = w6(a);
    else
      return usage();
    if (a.url.rfind("redis-cluster", 0) == 0) r["topology"] = q("cluster");
    if (a.masters > 0) r["masters"] = std::to_string(a.masters);
    std::ofstream(a.out) << json_object(r) << '\n';
    std::cout << json_object(r) << '\n';
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "dlock-bench: " << e.what() << '\n';
    return 1;
  }
}

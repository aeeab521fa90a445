// dlock-zk-bench: the ZooKeeper backend beside its limit, in one run.
//
//   W1  one client, sequential acquire+release pairs on distinct names:
//         dlock (zk://)
//         the limit: the ZooKeeper C client (async API) sending what dlock
//           sends, with the same pipelining: {create the lock's container,
//           create the ephemeral-sequential node, list the queue} in one
//           round trip, then the delete
//         the same requests one at a time (create, create, list, delete)
//           with the C client's synchronous calls, as a straightforward
//           client of the seed's algorithm would
//   W2  --threads threads sharing one client, distinct names: pairs/s
//   W3  --procs processes on one lock, critical section = a counter in a
//       file (read, +1, write): critical sections per second, hand-off
//       latency (a release to the next holder's grant, across processes),
//       the same-holder fraction, lost updates, and wake-ups per release
//       (ClientStats::wakeups over the releases that had a waiter)
//
//   dlock-zk-bench --hosts H:P[,H:P] [--seconds 3] [--reps 3] [--procs 4] [--threads 4] [--json FILE]
// Medians over the reps; every rep runs each client in turn.
#include <sys/wait.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <dlock/dlock.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "zk_batch.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct Args {
  std::string hosts;
  double seconds = 3;
  int reps = 3, procs = 4, threads = 4;
  std::string json;
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
  double per_s = 0, p50_us = 0;
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

dlock::ClientOptions quiet() {
  dlock::ClientOptions o;
  o.logger = [](dlock::LogLevel, std::string_view) {};
  return o;
}

Pairs w1_dlock(const std::string& hosts, double seconds, const std::string& run) {
  auto client = dlock::Client::connect("zk://" + hosts + "/" + run, quiet());
  long long n = 0;
  const auto before = client.stats().commands_sent;
  auto p = run_pairs(seconds, [&](long long i) {
    ++n;
    auto lease = client.acquire("w1:" + std::to_string(i), std::chrono::milliseconds(0));
    if (!lease.ok() || !lease->release().ok()) throw std::runtime_error("dlock pair failed");
  });
  if (std::getenv("DLOCK_BENCH_DEBUG"))
    std::fprintf(stderr, "dlock W1: %.2f requests per pair\n",
                 static_cast<double>(client.stats().commands_sent - before) / static_cast<double>(n));
  return p;
}

// A bare C-client session for the limit loops.
class Raw {
 public:
  explicit Raw(const std::string& hosts) {
    zh_ = zookeeper_init2(hosts.c_str(), nullptr, 10000, nullptr, nullptr, 0, [](const char*) {});
    for (int i = 0; i < 1000 && zoo_state(zh_) != ZOO_CONNECTED_STATE; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (zoo_state(zh_) != ZOO_CONNECTED_STATE) throw std::runtime_error("no ZooKeeper session");
  }
  ~Raw() { zookeeper_close(zh_); }
  zhandle_t* zh() const { return zh_; }
  void ensure(const std::string& path) {
    std::string part;
    for (std::size_t at = 1; at != std::string::npos;) {
      at = path.find('/', at + 1);
      part = path.substr(0, at);
      zoo_create(zh_, part.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
    }
  }

 private:
  zhandle_t* zh_ = nullptr;
};

// Waits for the completions of one round trip.
using Batch = dlock::bench::ZkBatch;

Pairs w1_limit(const std::string& hosts, double seconds, const std::string& run) {
  Raw raw(hosts);
  const std::string base = "/" + run + "-limit";
  raw.ensure(base);
  Batch b;
  return run_pairs(seconds, [&](long long i) {
    const std::string parent = base + "/w1:" + std::to_string(i);
    const std::string child = parent + "/_c_0123456789abcdef-lock-";
    b.arm(3);
    zoo_acreate(
        raw.zh(), parent.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_CONTAINER,
        [](int, const char*, const void* d) { Batch::of(d)->done(0, false); }, &b);
    zoo_acreate2(
        raw.zh(), child.c_str(), "o", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
        [](int rc, const char* path, const Stat*, const void* d) {
          if (rc == ZOK) Batch::of(d)->node = path;  // read by the caller after wait()
          Batch::of(d)->done(rc, true);
        },
        &b);
    zoo_aget_children2(
        raw.zh(), parent.c_str(), 0,
        [](int rc, const String_vector*, const Stat*, const void* d) { Batch::of(d)->done(rc, true); }, &b);
    if (b.wait() != ZOK) throw std::runtime_error("limit: create/list failed");
    b.arm(1);
    zoo_adelete(
        raw.zh(), b.node.c_str(), -1, [](int rc, const void* d) { Batch::of(d)->done(rc, true); }, &b);
    if (b.wait() != ZOK) throw std::runtime_error("limit: delete failed");
  });
}

Pairs w1_sync(const std::string& hosts, double seconds, const std::string& run) {
  Raw raw(hosts);
  const std::string base = "/" + run + "-sync";
  raw.ensure(base);
  char made[512];
  return run_pairs(seconds, [&](long long i) {
    const std::string parent = base + "/w1:" + std::to_string(i);
    zoo_create(raw.zh(), parent.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_CONTAINER, nullptr, 0);
    const std::string child = parent + "/_c_0123456789abcdef-lock-";
    if (zoo_create(raw.zh(), child.c_str(), "o", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, made,
                   sizeof made) != ZOK)
      throw std::runtime_error("sync: create failed");
    String_vector v{};
    if (zoo_get_children(raw.zh(), parent.c_str(), 0, &v) != ZOK) throw std::runtime_error("sync: list failed");
    deallocate_String_vector(&v);
    if (zoo_delete(raw.zh(), made, -1) != ZOK) throw std::runtime_error("sync: delete failed");
  });
}

double w2(const std::string& hosts, double seconds, int threads, const std::string& run) {
  auto client = dlock::Client::connect("zk://" + hosts + "/" + run, quiet());
  std::atomic<long long> pairs{0};
  std::atomic<bool> failed{false};
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      for (long long i = 0; Clock::now() < end; ++i) {
        auto lease = client.acquire("w2:" + std::to_string(t) + ":" + std::to_string(i), std::chrono::milliseconds(0));
        if (!lease.ok() || !lease->release().ok()) {
          failed = true;
          return;
        }
        ++pairs;
      }
    });
  for (auto& t : ts) t.join();
  if (failed) throw std::runtime_error("a W2 pair failed");
  return static_cast<double>(pairs.load()) / seconds;
}

struct Handoff {
  double cs_per_s = 0, p50_us = 0, p99_us = 0, same_holder = 0, wakeups_per_release = 0;
  long long lost = 0;
};

long long read_counter(const std::string& path) {
  std::ifstream in(path);
  long long v = 0;
  in >> v;
  return v;
}

Handoff w3(const std::string& hosts, const std::string& dir, double seconds, int procs, const std::string& run) {
  const std::string counter = dir + "/w3.counter";
  fs::remove(counter);
  std::vector<pid_t> kids;
  for (int k = 0; k < procs; ++k) {
    const pid_t pid = fork();
    if (pid == 0) {
      int rc = 0;
      try {
        auto client = dlock::Client::connect("zk://" + hosts + "/" + run, quiet());
        dlock::Mutex m(client, "w3");
        std::ofstream ev(dir + "/w3.events." + std::to_string(k));
        const auto end = Clock::now() + std::chrono::duration<double>(seconds);
        while (Clock::now() < end) {
          m.lock();
          const long long got = mono_ns();
          const long long v = read_counter(counter);
          std::ofstream(counter, std::ios::trunc) << v + 1;
          const long long rel = mono_ns();
          m.unlock();
          ev << got << ' ' << rel << '\n';
        }
        std::ofstream(dir + "/w3.wakeups." + std::to_string(k)) << client.stats().wakeups;
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
  long long wakeups = 0;
  for (int k = 0; k < procs; ++k) {
    std::ifstream in(dir + "/w3.events." + std::to_string(k));
    long long g = 0, r = 0;
    while (in >> g >> r) evs.push_back({g, r, k});
    wakeups += read_counter(dir + "/w3.wakeups." + std::to_string(k));
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
  // Releases that handed over to a waiter: each should wake exactly one.
  h.wakeups_per_release = gaps.empty() ? 0 : static_cast<double>(wakeups) / static_cast<double>(gaps.size());
  h.lost = static_cast<long long>(evs.size()) - read_counter(counter);
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--hosts" && i + 1 < argc)
      a.hosts = argv[++i];
    else if (k == "--seconds" && i + 1 < argc)
      a.seconds = std::atof(argv[++i]);
    else if (k == "--reps" && i + 1 < argc)
      a.reps = std::atoi(argv[++i]);
    else if (k == "--procs" && i + 1 < argc)
      a.procs = std::atoi(argv[++i]);
    else if (k == "--threads" && i + 1 < argc)
      a.threads = std::atoi(argv[++i]);
    else if (k == "--json" && i + 1 < argc)
      a.json = argv[++i];
    else
      a.hosts.clear(), i = argc;
  }
  if (a.hosts.empty()) {
    std::cerr << "usage: dlock-zk-bench --hosts H:P[,H:P] [--seconds S] [--reps N] [--procs P] [--threads T] "
                 "[--json FILE]\n";
    return 64;
  }
  char tmpl[] = "/tmp/dlock-zk-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  int rc = 0;
  try {
    const std::string kDlock = "dlock", kLimit = "C client, pipelined (limit)", kSync = "C client, one at a time";
    const std::vector<std::string> names = {kDlock, kLimit, kSync};
    std::map<std::string, std::vector<double>> rate, p50;
    std::vector<double> w2s, cs, h50, h99, same, wake;
    long long lost = 0;
    // The server's JIT warms up first, so that no client pays for it.
    w1_limit(a.hosts, std::min(2.0, a.seconds), "bench" + std::to_string(getpid()) + "warmup");
    for (int r = 0; r < a.reps; ++r) {
      const std::string run = "bench" + std::to_string(getpid()) + "r" + std::to_string(r);
      for (const auto& name : names) {
        const Pairs p = name == kDlock   ? w1_dlock(a.hosts, a.seconds, run)
                        : name == kLimit ? w1_limit(a.hosts, a.seconds, run)
                                         : w1_sync(a.hosts, a.seconds, run);
        rate[name].push_back(p.per_s);
        p50[name].push_back(p.p50_us);
      }
      w2s.push_back(w2(a.hosts, a.seconds, a.threads, run));
      const Handoff h = w3(a.hosts, dir, a.seconds, a.procs, run);
      cs.push_back(h.cs_per_s);
      h50.push_back(h.p50_us);
      h99.push_back(h.p99_us);
      same.push_back(h.same_holder);
      wake.push_back(h.wakeups_per_release);
      lost += h.lost;
    }
    std::printf("ZooKeeper\nW1, one client, acquire+release pairs on distinct names (median of %d reps of %.1f s)\n",
                a.reps, a.seconds);
    std::printf("  %-30s %12s %10s %14s\n", "client", "pairs/s", "p50 us", "vs the limit");
    const double limit = median(rate[kLimit]);
    for (const auto& name : names)
      std::printf("  %-30s %12.0f %10.1f %13.2fx\n", name.c_str(), median(rate[name]), median(p50[name]),
                  median(rate[name]) / limit);
    std::printf("W2, %d threads sharing one client: %.0f pairs/s\n", a.threads, median(w2s));
    std::printf(
        "W3, %d processes on one lock\n  %.0f critical sections/s, hand-off p50 %.0f us, p99 %.0f us, "
        "same-holder fraction %.2f, wake-ups per hand-off %.2f, lost updates %lld\n",
        a.procs, median(cs), median(h50), median(h99), median(same), median(wake), lost);
    if (!a.json.empty()) {
      std::ofstream j(a.json);
      j << "{\"store\": \"zookeeper\", \"w1_dlock_pairs_per_s\": " << median(rate[kDlock])
        << ", \"w1_dlock_p50_us\": " << median(p50[kDlock]) << ", \"w1_limit_pairs_per_s\": " << limit
        << ", \"w1_limit_p50_us\": " << median(p50[kLimit]) << ", \"w1_sync_pairs_per_s\": " << median(rate[kSync])
        << ", \"w2_pairs_per_s\": " << median(w2s) << ", \"w3_cs_per_s\": " << median(cs)
        << ", \"w3_handoff_p50_us\": " << median(h50) << ", \"w3_handoff_p99_us\": " << median(h99)
        << ", \"w3_same_holder\": " << median(same) << ", \"w3_wakeups_per_handoff\": " << median(wake)
        << ", \"w3_lost\": " << lost << "}\n";
    }
    if (lost != 0) rc = 1;
  } catch (const std::exception& e) {
    std::cerr << "dlock-zk-bench: " << e.what() << '\n';
    rc = 1;
  }
  fs::remove_all(dir);
  return rc;
}

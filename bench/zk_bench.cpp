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
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlock/dlock.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "handoff.hpp"
#include "harness.hpp"
#include "zk_batch.hpp"

namespace {

namespace bench = dlock::bench;

struct Args : bench::RunFlags {
  std::string hosts;
  int procs = 4, threads = 4;
};

dlock::ClientOptions quiet() {
  dlock::ClientOptions o;
  o.logger = [](dlock::LogLevel, std::string_view) {};
  return o;
}

bench::Pairs w1_dlock(const std::string& hosts, double seconds, const std::string& run) {
  auto client = dlock::Client::connect("zk://" + hosts + "/" + run, quiet());
  long long n = 0;
  const auto before = client.stats().commands_sent;
  auto p = bench::run_pairs(seconds, [&](long long i) {
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

// The limits' names in the table.
constexpr const char* kLimit = "C client, pipelined (limit)";
constexpr const char* kSync = "C client, one at a time";

bench::Pairs w1_limit(const std::string& hosts, double seconds, const std::string& run) {
  Raw raw(hosts);
  const std::string base = "/" + run + "-limit";
  raw.ensure(base);
  Batch b;
  return bench::run_pairs(seconds, [&](long long i) {
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

bench::Pairs w1_sync(const std::string& hosts, double seconds, const std::string& run) {
  Raw raw(hosts);
  const std::string base = "/" + run + "-sync";
  raw.ensure(base);
  char made[512];
  return bench::run_pairs(seconds, [&](long long i) {
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

// One rep of W1 for one client.
bench::Pairs w1(const Args& a, const std::string& client, const std::string& run) {
  if (client == "dlock") return w1_dlock(a.hosts, a.seconds, run);
  return client == kLimit ? w1_limit(a.hosts, a.seconds, run) : w1_sync(a.hosts, a.seconds, run);
}

// Prints the medians and writes the JSON line; the exit status: 1 if W3
// lost an update.
int report(const Args& a, const bench::PairsByClient& w1, const std::vector<double>& w2, const bench::HandoffReps& w3) {
  std::printf("ZooKeeper\nW1, one client, acquire+release pairs on distinct names (median of %d reps of %.1f s)\n",
              a.reps, a.seconds);
  w1.print(kLimit, 30);
  std::printf("W2, %d threads sharing one client: %.0f pairs/s\n", a.threads, bench::median(w2));
  w3.print(a.procs, true);
  bench::JsonLine j;
  j.str("store", "zookeeper").num("w1_dlock_pairs_per_s", w1.rate("dlock"));
  j.num("w1_dlock_p50_us", w1.p50("dlock")).num("w1_limit_pairs_per_s", w1.rate(kLimit));
  j.num("w1_limit_p50_us", w1.p50(kLimit)).num("w1_sync_pairs_per_s", w1.rate(kSync));
  j.num("w2_pairs_per_s", bench::median(w2));
  w3.add_json(j, true);
  j.write(a.json);
  return w3.lost() == 0 ? 0 : 1;
}

int run(const Args& a, const std::string& dir) {
  bench::PairsByClient w1s;
  std::vector<double> w2s;
  bench::HandoffReps w3;
  // The server's JIT warms up first, so that no client pays for it.
  w1_limit(a.hosts, std::min(2.0, a.seconds), "bench" + std::to_string(getpid()) + "warmup");
  for (int r = 0; r < a.reps; ++r) {
    const std::string run = "bench" + std::to_string(getpid()) + "r" + std::to_string(r);
    for (const char* name : {"dlock", kLimit, kSync}) w1s.add(name, w1(a, name, run));
    w2s.push_back(bench::shared_client_pairs("zk://" + a.hosts + "/" + run, quiet(), a.seconds, a.threads));
    w3.add(bench::measure_handoff("zk://" + a.hosts + "/" + run, quiet(), dir, a.seconds, a.procs));
  }
  return report(a, w1s, w2s, w3);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  bench::Flags flags(a);
  flags.add("--hosts", a.hosts).add("--procs", a.procs).add("--threads", a.threads);
  if (!flags.parse(argc, argv) || a.hosts.empty())
    return bench::usage(
        "dlock-zk-bench --hosts H:P[,H:P] [--seconds S] [--reps N] [--procs P] [--threads T] [--json FILE]", 64);
  return bench::in_temp_dir("dlock-zk-bench", [&](const std::string& dir) { return run(a, dir); });
}

// dlock-etcd-bench: the etcd backend beside its limit and a peer, in one run.
//
//   W1  one client, sequential acquire+release pairs on distinct names:
//         dlock (etcd://)
//         the limit: a minimal gRPC loop (etcd's protos, blocking stubs)
//           sending what dlock sends: the lock's transaction (put the key
//           under a lease unless it is there, read it and the line), then
//           the release's (delete it if its create revision is still the
//           one put)
//         etcdctl lock NAME -- true, one process per pair: what a shell
//           user of etcd's own lock pays
//   W2  --threads threads sharing one client, distinct names: pairs/s
//   W3  --procs processes on one lock, critical section = a counter in a
//       file: critical sections per second, hand-off latency, the
//       same-holder fraction, lost updates, wake-ups per release
//
//   dlock-etcd-bench --endpoints H:P[,H:P] [--seconds 3] [--reps 3] [--procs 4] [--threads 4] [--json FILE]
// Medians over the reps; every rep runs each client in turn.
#include <grpcpp/grpcpp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <dlock/dlock.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "etcdserverpb/rpc.grpc.pb.h"
#include "handoff.hpp"
#include "harness.hpp"

namespace {

namespace bench = dlock::bench;
namespace pb = etcdserverpb;

constexpr const char* kLimit = "gRPC loop (limit)";
constexpr const char* kEtcdctl = "etcdctl lock, a process per pair";

struct Args : bench::RunFlags {
  std::string endpoints;
  int procs = 4, threads = 4;
};

dlock::ClientOptions quiet() {
  dlock::ClientOptions o;
  o.logger = [](dlock::LogLevel, std::string_view) {};
  return o;
}

std::string url_of(const Args& a, const std::string& run) { return "etcd://" + a.endpoints + "/" + run; }

bench::Pairs w1_dlock(const Args& a, const std::string& run) {
  auto client = dlock::Client::connect(url_of(a, run), quiet());
  return bench::run_pairs(a.seconds, [&](long long i) {
    auto lease = client.acquire("w1:" + std::to_string(i), std::chrono::milliseconds(0));
    if (!lease.ok() || !lease->release().ok()) throw std::runtime_error("dlock pair failed");
  });
}

std::string prefix_end(std::string p) {
  ++p.back();
  return p;
}

bench::Pairs w1_limit(const Args& a, const std::string& run) {
  auto channel = grpc::CreateChannel("ipv4:" + a.endpoints, grpc::InsecureChannelCredentials());
  auto kv = pb::KV::NewStub(channel);
  auto leases = pb::Lease::NewStub(channel);
  pb::LeaseGrantRequest g;
  g.set_ttl(10);
  pb::LeaseGrantResponse granted;
  {
    grpc::ClientContext ctx;
    if (!leases->LeaseGrant(&ctx, g, &granted).ok()) throw std::runtime_error("limit: no lease");
  }
  char hex[24];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(granted.id()));
  return bench::run_pairs(a.seconds, [&](long long i) {
    const std::string line = run + "-limit/w1:" + std::to_string(i) + "/";
    const std::string key = line + hex;
    pb::TxnRequest lock;
    auto* cmp = lock.add_compare();
    cmp->set_key(key);
    cmp->set_target(pb::Compare::CREATE);
    cmp->set_create_revision(0);
    auto* put = lock.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_lease(granted.id());
    for (auto* ops : {lock.mutable_success(), lock.mutable_failure()}) {
      ops->Add()->mutable_request_range()->set_key(key);
      auto* r = ops->Add()->mutable_request_range();
      r->set_key(line);
      r->set_range_end(prefix_end(line));
      r->set_sort_target(pb::RangeRequest::CREATE);
      r->set_sort_order(pb::RangeRequest::ASCEND);
    }
    pb::TxnResponse locked;
    grpc::ClientContext c1;
    if (!kv->Txn(&c1, lock, &locked).ok() || !locked.succeeded()) throw std::runtime_error("limit: lock failed");
    pb::TxnRequest unlock;
    auto* same = unlock.add_compare();
    same->set_key(key);
    same->set_target(pb::Compare::CREATE);
    same->set_create_revision(locked.header().revision());
    unlock.add_success()->mutable_request_delete_range()->set_key(key);
    pb::TxnResponse unlocked;
    grpc::ClientContext c2;
    if (!kv->Txn(&c2, unlock, &unlocked).ok() || !unlocked.succeeded())
      throw std::runtime_error("limit: unlock failed");
  });
}

// etcdctl lock NAME -- true: a process (and a session) per pair.
bench::Pairs w1_etcdctl(const Args& a, const std::string& run) {
  return bench::run_pairs(std::min(a.seconds, 2.0), [&](long long i) {
    const std::string name = run + "-etcdctl/w1:" + std::to_string(i);
    const std::string endpoints = "--endpoints=" + a.endpoints;
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("ETCDCTL_API", "3", 1);
      execlp("etcdctl", "etcdctl", endpoints.c_str(), "lock", name.c_str(), "--", "true", static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw std::runtime_error("etcdctl lock failed");
  });
}

bench::Pairs w1(const Args& a, const std::string& client, const std::string& run) {
  if (client == "dlock") return w1_dlock(a, run);
  return client == kLimit ? w1_limit(a, run) : w1_etcdctl(a, run);
}

int report(const Args& a, const bench::PairsByClient& w1s, const std::vector<double>& w2s,
           const bench::HandoffReps& w3) {
  std::printf("etcd\nW1, one client, acquire+release pairs on distinct names (median of %d reps of %.1f s)\n", a.reps,
              a.seconds);
  w1s.print(kLimit, 34);
  std::printf("W2, %d threads sharing one client: %.0f pairs/s\n", a.threads, bench::median(w2s));
  w3.print(a.procs, true);
  bench::JsonLine j;
  j.str("store", "etcd").num("w1_dlock_pairs_per_s", w1s.rate("dlock"));
  j.num("w1_dlock_p50_us", w1s.p50("dlock")).num("w1_limit_pairs_per_s", w1s.rate(kLimit));
  j.num("w1_limit_p50_us", w1s.p50(kLimit)).num("w1_etcdctl_pairs_per_s", w1s.rate(kEtcdctl));
  j.num("w2_pairs_per_s", bench::median(w2s));
  w3.add_json(j, true);
  j.write(a.json);
  return w3.lost() == 0 ? 0 : 1;
}

int run(const Args& a, const std::string& dir) {
  bench::PairsByClient w1s;
  std::vector<double> w2s;
  bench::HandoffReps w3;
  // W3 first: its workers are forked, and gRPC does not survive a fork of a
  // process that has used it (its threads stay behind), so this process
  // makes no gRPC call before they are done.
  for (int r = 0; r < a.reps; ++r)
    w3.add(bench::measure_handoff(url_of(a, "bench" + std::to_string(getpid()) + "w3r" + std::to_string(r)), quiet(),
                                  dir, a.seconds, a.procs));
  for (int r = 0; r < a.reps; ++r) {
    const std::string run = "bench" + std::to_string(getpid()) + "r" + std::to_string(r);
    for (const char* name : {"dlock", kLimit, kEtcdctl}) w1s.add(name, w1(a, name, run));
    w2s.push_back(bench::shared_client_pairs(url_of(a, run), quiet(), a.seconds, a.threads));
  }
  return report(a, w1s, w2s, w3);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  bench::Flags flags(a);
  flags.add("--endpoints", a.endpoints).add("--procs", a.procs).add("--threads", a.threads);
  if (!flags.parse(argc, argv) || a.endpoints.empty())
    return bench::usage(
        "dlock-etcd-bench --endpoints H:P[,H:P] [--seconds S] [--reps N] [--procs P] [--threads T] [--json FILE]", 64);
  return bench::in_temp_dir("dlock-etcd-bench", [&](const std::string& dir) { return run(a, dir); });
}

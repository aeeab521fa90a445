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
//       same-holder fraction, lost updates, wake-ups per release; beside
//       it the limit, etcd's Mutex by hand over gRPC in as many processes
//   W4  --locks distinct names held by one client, all on its one lease
//       (session_timeout --session-timeout s, a keep-alive every third of
//       it), once, after the reps: grants/s, then over 3 keep-alive periods
//       the keep-alive round trips per period (the member's count of lease
//       renewals, etcd_debugging_lease_renewed_total on its /metrics page, and
//       the keep-alive answers the client took, seen as a lease's
//       valid_until moving), this process's CPU and the member's, whether
//       any lock was lost, then releases/s. --locks 0: no W4.
// With --server-pid (the etcd member's process, on this machine), W1 also
// gives the member's CPU time (utime + stime, /proc/PID/stat) per pair of
// each client, and W4 its CPU while holding.
//
//   dlock-etcd-bench --endpoints H:P[,H:P] [--seconds 3] [--reps 3] [--procs 4] [--threads 4]
//                    [--locks 10000] [--session-timeout 3] [--server-pid PID] [--json FILE]
// Medians over the reps; every rep runs each client in turn.
#include <grpcpp/grpcpp.h>
#include <netdb.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <dlock/dlock.hpp>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
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
  int locks = 10000, session_timeout = 3, server_pid = 0;
};

// CPU time (user + system, every thread, those ended too) of process `pid`
// so far, in seconds, from /proc/PID/stat; 0 for pid 0 or one not readable.
double process_cpu_s(int pid) {
  if (pid <= 0) return 0;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto end = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (end == std::string::npos) return 0;
  std::istringstream fields(stat.substr(end + 2));
  std::string skip;
  for (int f = 3; f < 14; ++f) fields >> skip;  // state ... cmajflt
  double utime = 0, stime = 0;
  if (!(fields >> utime >> stime)) return 0;
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// This process's CPU time so far (user + system, every thread), in seconds.
double self_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// The body of GET /metrics from the member at `endpoint` (H:P, plain
// HTTP, as etcd serves it beside gRPC on its client port); empty if it
// could not be read.
std::string metrics_page(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  if (colon == std::string::npos) return {};
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(endpoint.substr(0, colon).c_str(), endpoint.substr(colon + 1).c_str(), &hints, &found) != 0)
    return {};
  const int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  const timeval patience{2, 0};
  std::string page;
  if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience) == 0 &&
      connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    const std::string ask = "GET /metrics HTTP/1.0\r\nHost: " + endpoint + "\r\n\r\n";
    if (send(fd, ask.data(), ask.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(ask.size())) {
      char buf[65536];
      for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) page.append(buf, static_cast<std::size_t>(n));
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return page;
}

// A counter without labels on that page; -1 if it is not there.
double etcd_counter(const std::string& endpoints, const std::string& name) {
  const std::string page = metrics_page(endpoints.substr(0, endpoints.find(',')));
  const auto at = page.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(page.substr(at + name.size() + 2));
}

// One client's W1 run: its pairs, and the etcd member's CPU per pair over
// them (0 without --server-pid).
struct W1Run {
  bench::Pairs pairs;
  double server_us = 0;
};

// bench::run_pairs, the member's CPU time read before and after.
template <class Pair>
W1Run measured_pairs(const Args& a, double seconds, Pair pair) {
  long long n = 0;
  const double cpu0 = process_cpu_s(a.server_pid);
  const auto p = bench::run_pairs(seconds, [&](long long i) {
    pair(i);
    n = i + 1;
  });
  const double cpu = process_cpu_s(a.server_pid) - cpu0;
  return {p, a.server_pid > 0 && n > 0 ? cpu * 1e6 / static_cast<double>(n) : 0};
}

dlock::ClientOptions quiet() {
  dlock::ClientOptions o;
  o.logger = [](dlock::LogLevel, std::string_view) {};
  return o;
}

std::string url_of(const Args& a, const std::string& run) { return "etcd://" + a.endpoints + "/" + run; }

W1Run w1_dlock(const Args& a, const std::string& run) {
  auto client = dlock::Client::connect(url_of(a, run), quiet());
  return measured_pairs(a, a.seconds, [&](long long i) {
    auto lease = client.acquire("w1:" + std::to_string(i), std::chrono::milliseconds(0));
    if (!lease.ok() || !lease->release().ok()) throw std::runtime_error("dlock pair failed");
  });
}

std::string prefix_end(std::string p) {
  ++p.back();
  return p;
}

// What the limits send, as dlock sends it. The line, oldest first:
void line_range(pb::RangeRequest& r, const std::string& line, bool keys_only) {
  r.set_key(line);
  r.set_range_end(prefix_end(line));
  r.set_sort_target(pb::RangeRequest::CREATE);
  r.set_sort_order(pb::RangeRequest::ASCEND);
  r.set_keys_only(keys_only);
}

// The lock's transaction: `key` under `lease` unless it is there, then the
// key and the line read back.
pb::TxnRequest join_request(const std::string& key, std::int64_t lease, const std::string& line) {
  pb::TxnRequest join;
  auto* cmp = join.add_compare();
  cmp->set_key(key);
  cmp->set_target(pb::Compare::CREATE);
  cmp->set_create_revision(0);
  auto* put = join.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_lease(lease);
  for (auto* ops : {join.mutable_success(), join.mutable_failure()}) {
    ops->Add()->mutable_request_range()->set_key(key);
    line_range(*ops->Add()->mutable_request_range(), line, false);
  }
  return join;
}

// The release's: `key` deleted if it is still the one created at `revision`.
void erase_created(pb::KV::Stub& kv, const std::string& key, std::int64_t revision) {
  pb::TxnRequest erase;
  auto* same = erase.add_compare();
  same->set_key(key);
  same->set_target(pb::Compare::CREATE);
  same->set_create_revision(revision);
  erase.add_success()->mutable_request_delete_range()->set_key(key);
  pb::TxnResponse erased;
  grpc::ClientContext c;
  if (!kv.Txn(&c, erase, &erased).ok() || !erased.succeeded()) throw std::runtime_error("limit: unlock failed");
}

// A lease of `ttl` seconds, kept alive by nobody (it outlives the run).
std::int64_t grant_lease(const std::shared_ptr<grpc::Channel>& channel, std::int64_t ttl) {
  pb::LeaseGrantRequest g;
  g.set_ttl(ttl);
  pb::LeaseGrantResponse granted;
  grpc::ClientContext ctx;
  if (!pb::Lease::NewStub(channel)->LeaseGrant(&ctx, g, &granted).ok()) throw std::runtime_error("limit: no lease");
  return granted.id();
}

std::string hex_of(std::int64_t lease) {
  char hex[24];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(lease));
  return hex;
}

W1Run w1_limit(const Args& a, const std::string& run) {
  auto channel = grpc::CreateChannel("ipv4:" + a.endpoints, grpc::InsecureChannelCredentials());
  auto kv = pb::KV::NewStub(channel);
  const std::int64_t lease = grant_lease(channel, 10);
  const std::string hex = hex_of(lease);
  return measured_pairs(a, a.seconds, [&](long long i) {
    const std::string line = run + "-limit/w1:" + std::to_string(i) + "/";
    const std::string key = line + hex;
    pb::TxnResponse locked;
    grpc::ClientContext c;
    if (!kv->Txn(&c, join_request(key, lease, line), &locked).ok() || !locked.succeeded())
      throw std::runtime_error("limit: lock failed");
    erase_created(*kv, key, locked.header().revision());
  });
}

// W3's limit: etcd's Mutex spoken by hand on one channel with blocking
// stubs, the round trips dlock makes and no more: the lock's transaction
// (put unless there, read the line); while another key is ahead, a watch
// of the one just before, from now, a read once it is in place (it may
// have gone meanwhile), and a read once it went; then the release's
// transaction. No keep-alive: its lease outlives the run.
class LimitTurns final : public bench::Turns {
 public:
  LimitTurns(const std::string& endpoints, std::string line)
      : line_(std::move(line)),
        channel_(grpc::CreateChannel("ipv4:" + endpoints, grpc::InsecureChannelCredentials())),
        kv_(pb::KV::NewStub(channel_)),
        watch_stub_(pb::Watch::NewStub(channel_)),
        lease_(grant_lease(channel_, 60)),
        key_(line_ + hex_of(lease_)),
        stream_(watch_stub_->Watch(&watch_ctx_)) {}
  ~LimitTurns() override {
    watch_ctx_.TryCancel();
    stream_->Finish();
  }

  void lock() override {
    pb::TxnResponse joined;
    grpc::ClientContext c;
    if (!kv_->Txn(&c, join_request(key_, lease_, line_), &joined).ok() || joined.responses_size() < 2)
      throw std::runtime_error("W3 limit: lock");
    const int first = joined.succeeded() ? 1 : 0;
    rev_ = joined.responses(first).response_range().kvs(0).create_revision();
    pb::RangeResponse line = joined.responses(first + 1).response_range();
    for (int again = 0;;) {
      const auto ahead = just_before(line);
      if (!ahead) return;
      const std::int64_t id = ++watches_;
      pb::WatchRequest w;
      w.mutable_create_request()->set_key(ahead->key());
      w.mutable_create_request()->add_filters(pb::WatchCreateRequest::NOPUT);
      w.mutable_create_request()->set_watch_id(id);
      if (!stream_->Write(w)) throw std::runtime_error("W3 limit: watch");
      const std::int64_t from = await(id, [](const pb::WatchResponse& r) { return r.created(); });
      line = read_line();
      // A write between the watch's start and its making leaves it for
      // etcd's catch-up pass (up to 100 ms): made again.
      const bool caught_up = line.header().revision() == from || again++ >= 4;
      if (same(just_before(line), *ahead) && caught_up) {
        await(id, [](const pb::WatchResponse& r) { return r.events_size() > 0 || r.canceled(); });
        line = read_line();
      }
      pb::WatchRequest cancel;
      cancel.mutable_cancel_request()->set_watch_id(id);
      stream_->Write(cancel);
    }
  }

  void unlock() override { erase_created(*kv_, key_, rev_); }

 private:
  pb::RangeResponse read_line() {
    pb::RangeRequest r;
    line_range(r, line_, true);
    pb::RangeResponse out;
    grpc::ClientContext c;
    if (!kv_->Range(&c, r, &out).ok()) throw std::runtime_error("W3 limit: read");
    return out;
  }
  // The key created last before this one's; none: this one holds.
  std::optional<mvccpb::KeyValue> just_before(const pb::RangeResponse& line) const {
    std::optional<mvccpb::KeyValue> out;
    for (const auto& kv : line.kvs())
      if (kv.create_revision() < rev_) out = kv;
    return out;
  }
  static bool same(const std::optional<mvccpb::KeyValue>& a, const mvccpb::KeyValue& b) {
    return a && a->key() == b.key() && a->create_revision() == b.create_revision();
  }
  // Reads the stream until `id` answers as `until` says (others' answers,
  // cancelled watches', are skipped).
  // Its header's revision.
  template <class Until>
  std::int64_t await(std::int64_t id, Until until) {
    pb::WatchResponse r;
    while (stream_->Read(&r))
      if (r.watch_id() == id && until(r)) return r.header().revision();
    throw std::runtime_error("W3 limit: the watch stream ended");
  }

  std::string line_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::KV::Stub> kv_;
  std::unique_ptr<pb::Watch::Stub> watch_stub_;
  std::int64_t lease_;
  std::string key_;
  grpc::ClientContext watch_ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> stream_;
  std::int64_t rev_ = 0, watches_ = 0;
};

// etcdctl lock NAME -- true: a process (and a session) per pair.
W1Run w1_etcdctl(const Args& a, const std::string& run) {
  return measured_pairs(a, std::min(a.seconds, 2.0), [&](long long i) {
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

W1Run w1(const Args& a, const std::string& client, const std::string& run) {
  if (client == "dlock") return w1_dlock(a, run);
  return client == kLimit ? w1_limit(a, run) : w1_etcdctl(a, run);
}

// W4: what holding many locks on the one lease costs.
struct W4 {
  double grants_per_s = 0, releases_per_s = 0;
  double server_renewals = -1;  // over the window, as the member counts them; -1: its /metrics unread
  int client_keepalives = 0;    // answers the client took over the window
  double client_cpu_percent = 0;
  double server_cpu_percent = -1;  // -1: no --server-pid
  long long lost = 0;              // on_lost calls and ClientStats::leases_lost, the larger
  bool all_valid = false;          // every lease held, not lost, valid_until ahead, at the window's end
  long long release_failures = 0;
};

// `n` distinct names, taken by 16 threads sharing the client (as
// dlock-bench's W4 does), each lease counting its loss in `lost`.
std::vector<dlock::Lease> grant_all(const dlock::Client& client, int n, const std::string& tag,
                                    std::atomic<long long>& lost) {
  dlock::LockOptions o;
  o.on_lost = [&lost](dlock::LossReason) { ++lost; };
  std::vector<dlock::Lease> leases;
  leases.reserve(static_cast<std::size_t>(n));
  std::mutex mu;
  std::vector<std::thread> ts;
  std::atomic<bool> failed{false};
  for (int t = 0; t < 16; ++t)
    ts.emplace_back([&, t] {
      for (int i = t; i < n && !failed; i += 16) {
        auto l = client.try_acquire(tag + std::to_string(i), o);
        if (!l.ok()) failed = true;
        std::lock_guard lock(mu);
        if (l.ok()) leases.push_back(std::move(*l));
      }
    });
  for (auto& t : ts) t.join();
  if (failed) throw std::runtime_error("W4: an acquire failed");
  return leases;
}

// Releases them all, 16 threads: the releases that failed.
long long release_all(std::vector<dlock::Lease>& leases) {
  std::atomic<long long> failures{0};
  std::vector<std::thread> ts;
  for (std::size_t t = 0; t < 16; ++t)
    ts.emplace_back([&, t] {
      for (std::size_t i = t; i < leases.size(); i += 16)
        if (!leases[i].release().ok()) ++failures;
    });
  for (auto& t : ts) t.join();
  return failures;
}

// Sleeps until `until`, counting the times `lease`'s valid_until moves
// forward (each a keep-alive answered), looking every 50 ms (20 wake-ups
// a second: their CPU is part of the client's in the window).
int count_keepalives(const dlock::Lease& lease, bench::Clock::time_point until) {
  int moves = 0;
  auto seen = lease.valid_until();
  while (bench::Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (const auto now = lease.valid_until(); now > seen) {
      ++moves;
      seen = now;
    }
  }
  return moves;
}

// The window: from a quarter of a period after a keep-alive was answered,
// 3 periods, so that it holds three of them (as dlock-bench's W4 times its
// renewals).
void hold_window(const Args& a, const std::vector<dlock::Lease>& leases, W4& w) {
  const auto period = std::chrono::milliseconds(a.session_timeout * 1000 / 3);
  const auto seen = leases.front().valid_until();
  const auto give_up = bench::Clock::now() + 3 * period;
  while (leases.front().valid_until() == seen && bench::Clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(period / 4);
  const char* renewals = "etcd_debugging_lease_renewed_total";
  const double renewed0 = etcd_counter(a.endpoints, renewals);
  const double cpu0 = self_cpu_s(), server0 = process_cpu_s(a.server_pid);
  const auto t0 = bench::Clock::now();
  w.client_keepalives = count_keepalives(leases.front(), t0 + 3 * period);
  const double wall = std::chrono::duration<double>(bench::Clock::now() - t0).count();
  w.client_cpu_percent = 100 * (self_cpu_s() - cpu0) / wall;
  if (a.server_pid > 0) w.server_cpu_percent = 100 * (process_cpu_s(a.server_pid) - server0) / wall;
  const double renewed = etcd_counter(a.endpoints, renewals);
  if (renewed0 >= 0 && renewed >= 0) w.server_renewals = renewed - renewed0;
  const auto now = bench::Clock::now();
  w.all_valid = static_cast<int>(leases.size()) == a.locks;
  for (const auto& l : leases) w.all_valid = w.all_valid && l.held() && !l.lost() && l.valid_until() > now;
}

W4 w4(const Args& a, const std::string& run) {
  const std::string url = url_of(a, run) + "?session_timeout=" + std::to_string(a.session_timeout) + "s";
  std::atomic<long long> lost{0};  // outlives the client, whose I/O thread counts in it
  auto client = dlock::Client::connect(url, quiet());
  W4 w;
  const auto t0 = bench::Clock::now();
  auto leases = grant_all(client, a.locks, "w4:", lost);
  w.grants_per_s = a.locks / std::chrono::duration<double>(bench::Clock::now() - t0).count();
  hold_window(a, leases, w);
  w.lost = std::max<long long>(lost, static_cast<long long>(client.stats().leases_lost));
  const auto t1 = bench::Clock::now();
  w.release_failures = release_all(leases);
  w.releases_per_s = a.locks / std::chrono::duration<double>(bench::Clock::now() - t1).count();
  return w;
}

// Everything a run measured.
struct Results {
  bench::PairsByClient w1;
  std::map<std::string, std::vector<double>> w1_server_us;  // per client, per rep
  std::vector<double> w2;
  bench::HandoffReps w3, w3_limit;
  std::optional<W4> w4;
};

// The JSON names of W1's clients.
const std::vector<std::pair<std::string, std::string>>& w1_keys() {
  static const std::vector<std::pair<std::string, std::string>> keys = {
      {"dlock", "dlock"}, {kLimit, "limit"}, {kEtcdctl, "etcdctl"}};
  return keys;
}

void print_w4(const Args& a, const W4& w) {
  const double periods = 3;
  std::printf("W4, %d locks on one client's lease (session_timeout %ds: a keep-alive every %.1f s), held %g periods\n",
              a.locks, a.session_timeout, a.session_timeout / 3.0, periods);
  std::printf("  grants: %.0f/s; releases: %.0f/s (%lld failed)\n", w.grants_per_s, w.releases_per_s,
              w.release_failures);
  if (w.server_renewals >= 0)
    std::printf("  keep-alive round trips per period: %.2f (the member's etcd_debugging_lease_renewed_total)\n",
                w.server_renewals / periods);
  else
    std::printf("  keep-alive round trips per period: the member's /metrics unread; 1 expected (one lease)\n");
  std::printf("  keep-alive answers the client took per period: %.2f (a lease's valid_until moving)\n",
              w.client_keepalives / periods);
  std::printf("  client CPU: %.2f %% of a core", w.client_cpu_percent);
  if (w.server_cpu_percent >= 0) std::printf("; etcd member CPU: %.2f %% of a core", w.server_cpu_percent);
  std::printf("\n  leases lost: %lld; all still held and valid at the end: %s\n", w.lost, w.all_valid ? "yes" : "NO");
}

void add_w4_json(bench::JsonLine& j, const Args& a, const W4& w) {
  j.num("w4_locks", a.locks).num("w4_session_timeout_s", a.session_timeout).num("w4_periods", 3);
  j.num("w4_grants_per_s", w.grants_per_s).num("w4_releases_per_s", w.releases_per_s);
  j.num("w4_release_failures", w.release_failures);
  if (w.server_renewals >= 0) j.num("w4_round_trips_per_period", w.server_renewals / 3);
  j.num("w4_client_keepalives_per_period", w.client_keepalives / 3.0);
  j.num("w4_client_cpu_percent", w.client_cpu_percent);
  if (w.server_cpu_percent >= 0) j.num("w4_server_cpu_percent", w.server_cpu_percent);
  j.num("w4_lost", w.lost).raw("w4_all_valid", w.all_valid ? "true" : "false");
}

// Prints the medians and writes the JSON line; the exit status: 1 if W3
// lost an update, or W4 a lock or a release.
int report(const Args& a, const Results& r) {
  std::printf("etcd\nW1, one client, acquire+release pairs on distinct names (median of %d reps of %.1f s)\n", a.reps,
              a.seconds);
  r.w1.print(kLimit, 34);
  if (a.server_pid > 0) {
    std::printf("  etcd member CPU per pair:");
    for (const auto& [client, key] : w1_keys())
      std::printf(" %s %.0f us%s", key.c_str(), bench::median(r.w1_server_us.at(client)),
                  key == "etcdctl" ? "\n" : ",");
  }
  std::printf("W2, %d threads sharing one client: %.0f pairs/s\n", a.threads, bench::median(r.w2));
  r.w3.print(a.procs, true);
  r.w3_limit.print_beside("the limit, etcd's Mutex by hand over gRPC");
  if (r.w4) print_w4(a, *r.w4);
  bench::JsonLine j;
  j.str("store", "etcd").num("w1_dlock_pairs_per_s", r.w1.rate("dlock"));
  j.num("w1_dlock_p50_us", r.w1.p50("dlock")).num("w1_limit_pairs_per_s", r.w1.rate(kLimit));
  j.num("w1_limit_p50_us", r.w1.p50(kLimit)).num("w1_etcdctl_pairs_per_s", r.w1.rate(kEtcdctl));
  if (a.server_pid > 0)
    for (const auto& [client, key] : w1_keys())
      j.num("w1_" + key + "_server_cpu_us_per_pair", bench::median(r.w1_server_us.at(client)));
  j.num("w2_pairs_per_s", bench::median(r.w2));
  r.w3.add_json(j, true);
  r.w3_limit.add_json(j, false, "w3_limit_");
  if (r.w4) add_w4_json(j, a, *r.w4);
  j.write(a.json);
  const bool w4_ok = !r.w4 || (r.w4->lost == 0 && r.w4->all_valid && r.w4->release_failures == 0);
  return r.w3.lost() == 0 && r.w3_limit.lost() == 0 && w4_ok ? 0 : 1;
}

int run(const Args& a, const std::string& dir) {
  Results r;
  const std::string tag = "bench" + std::to_string(getpid());
  // W3 first: its workers are forked, and gRPC does not survive a fork of a
  // process that has used it (its threads stay behind), so this process
  // makes no gRPC call before they are done.
  for (int rep = 0; rep < a.reps; ++rep) {
    r.w3.add(bench::measure_handoff(url_of(a, tag + "w3r" + std::to_string(rep)), quiet(), dir, a.seconds, a.procs));
    const std::string line = tag + "w3r" + std::to_string(rep) + "-limit/w3/";
    r.w3_limit.add(bench::measure_handoff([&] { return std::make_unique<LimitTurns>(a.endpoints, line); }, dir,
                                          a.seconds, a.procs));
  }
  for (int rep = 0; rep < a.reps; ++rep) {
    const std::string run = tag + "r" + std::to_string(rep);
    for (const auto& [name, key] : w1_keys()) {
      const W1Run one = w1(a, name, run);
      r.w1.add(name, one.pairs);
      r.w1_server_us[name].push_back(one.server_us);
    }
    r.w2.push_back(bench::shared_client_pairs(url_of(a, run), quiet(), a.seconds, a.threads));
  }
  // W4 last, once: its keys are gone before it ends, but its writes do not
  // weigh on the others' rows.
  if (a.locks > 0) r.w4 = w4(a, tag + "w4");
  return report(a, r);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  bench::Flags flags(a);
  flags.add("--endpoints", a.endpoints).add("--procs", a.procs).add("--threads", a.threads);
  flags.add("--locks", a.locks).add("--session-timeout", a.session_timeout).add("--server-pid", a.server_pid);
  if (!flags.parse(argc, argv) || a.endpoints.empty() || a.locks < 0 || a.session_timeout < 1)
    return bench::usage(
        "dlock-etcd-bench --endpoints H:P[,H:P] [--seconds S] [--reps N] [--procs P] [--threads T] "
        "[--locks N] [--session-timeout S] [--server-pid PID] [--json FILE]",
        64);
  return bench::in_temp_dir("dlock-etcd-bench", [&](const std::string& dir) { return run(a, dir); });
}

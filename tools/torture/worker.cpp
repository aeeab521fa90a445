#include "worker.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "common/sync_redis.hpp"
#include "history.hpp"
#include "slots.hpp"
#include "strategies.hpp"

namespace torture {

// The protected resources live on a second, fault-free server. Beside the
// fenced register, the unfenced one shows what fencing stopped.
const char* const kFencedWriteLua = R"(
local seq = redis.call('INCR', KEYS[2])
local max = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < max then return {0, seq} end
redis.call('SET', KEYS[1], ARGV[1])
return {1, seq})";
const char* const kUnfencedWriteLua = "return redis.call('INCR', KEYS[1])";

using dlock::tools::Reply;
using dlock::tools::SyncRedis;
namespace {

std::atomic<bool> g_stop{false};
void on_term(int) { g_stop.store(true); }

const char* phase_name(Outcome o) {
  switch (o) {
    case Outcome::ok:
      return "ok";
    case Outcome::fail:
      return "fail";
    case Outcome::info:
      return "info";
  }
  return "info";
}

// This process's pid as the verifier sees it: in a pid namespace of its own
// getpid() is not, but /proc (the host's, not remounted) names it.
int host_pid() {
  char buf[32] = {};
  const ssize_t n = ::readlink("/proc/self", buf, sizeof buf - 1);
  return n > 0 ? std::atoi(buf) : ::getpid();
}

std::int64_t wall_minus_mono_ms() { return wall_ms() - mono_ns() / 1'000'000; }

class Worker {
 public:
  explicit Worker(const WorkerArgs& a)
      : a_(a),
        log_(a.history),
        slots_(a.slots, a.slot_count, false),
        slot_(slots_.at(a.slot)),
        rng_(a.seed * 1'000'003 + static_cast<std::uint64_t>(a.inc)),
        resource_("127.0.0.1", a.resource_port, std::chrono::milliseconds(5000)) {
    parse_failpoints(a.failpoints);
  }

  int run() {
    slot_.pid.store(host_pid());
    set_phase(slot_, Phase::idle);
    emit("start", "", "", {});
    StrategyConfig sc;
    sc.ports = a_.lock_ports;
    sc.url = a_.lock_url;
    sc.sqlite_path = a_.sqlite_path;
    sc.user = a_.user;
    sc.client_name = a_.proc;
    sc.ttl_ms = a_.ttl_ms;
    sc.failpoint = [this](const char* name) { failpoint(name); };
    sc.resource_port = a_.resource_port;
    sc.on_child = [this](int pid) { slot_.child_pid.store(pid); };
    slot_.child_pid.store(0);  // a killed predecessor's child is gone
    sc.permits = a_.permits;
    std::unique_ptr<Strategy> strategy;
    try {
      strategy = make_strategy(a_.strategy, sc);
    } catch (const std::exception& ex) {
      emit("start", "fail", "", {}, ex.what());
      return 1;
    }
    clock_base_ = wall_minus_mono_ms();
    int n = 0;
    while (!g_stop.load()) {
      check_clock();
      const std::string grant = a_.proc + "/" + std::to_string(a_.inc) + "/" + std::to_string(++n);
      iteration(*strategy, grant);
      sleep_ms(uniform(a_.think_ms / 2));
    }
    emit("stop", "", "", {});
    return 0;
  }

 private:
  void iteration(Strategy& s, const std::string& grant) {
    set_phase(slot_, Phase::acquiring);
    emit("acquire", "invoke", grant, {});
    failpoint("acquire:before");
    auto r = s.acquire(std::chrono::milliseconds(a_.wait_ms), [this, grant] { emit("lost", "ok", grant, {}); });
    Event ok = base("acquire", phase_name(r.outcome), r.outcome == Outcome::ok ? grant : "");
    if (r.outcome == Outcome::ok) ok.fence = r.fence;
    ok.detail = r.detail;
    const HoldPlan plan = s.plan();
    ok.kind = plan.kind;  // a recipe's: shared, exclusive, permit, leader, fair
    log_.write(ok);
    log_wakeups(s);
    if (r.outcome != Outcome::ok) {
      set_phase(slot_, Phase::idle);
      return;
    }
    slot_.grants.fetch_add(1);
    set_phase(slot_, Phase::holding);
    failpoint("hold:start");
    // The lock-set workload: read, think, write; a leader does it for a few
    // rounds; readers and permit holders only read and think.
    // Holds meant to outlive the lease (think of a lease or more) are one
    // round: a leader's rounds would multiply them.
    const int rounds = a_.think_ms >= a_.ttl_ms ? 1 : std::max(1, plan.rounds);
    for (int round = 0; round < rounds && !g_stop.load(); ++round) {
      auto read = resource_.cmd({"GET", "counter"});
      const std::int64_t v = read.good() && !read.is_nil ? std::stoll(read.str) : 0;
      emit("read", read.good() ? "ok" : "info", grant, v);
      sleep_ms(a_.think_min_ms + uniform(std::max<std::int64_t>(0, a_.think_ms - a_.think_min_ms)));
      failpoint("hold:before-write");
      // A careful holder checks its lease before writing; a pause right after
      // the check (the failpoint) is the case only fencing covers.
      if (!s.still_valid()) {
        emit("lost", "ok", grant, {}, "lease no longer valid at the pre-write check; writes skipped");
        break;
      }
      failpoint("hold:after-check");
      if (!plan.writes) continue;
      register_write(s, grant, r.fence);
      emit("counter_write", "invoke", grant, v + 1);
      auto w = resource_.cmd({"SET", "counter", std::to_string(v + 1)});
      emit("counter_write", w.good() ? "ok" : "info", grant, v + 1);
    }
    failpoint("release:before");
    set_phase(slot_, Phase::releasing);
    emit("release", "invoke", grant, {});
    auto rel = s.release();
    emit("release", phase_name(rel.outcome), grant, {}, rel.detail);
    set_phase(slot_, Phase::idle);
  }

  // The strategy's count of waiters woken by releases, when it moved.
  void log_wakeups(const Strategy& s) {
    const auto n = s.wakeups();
    if (!n || *n == wakeups_logged_) return;
    wakeups_logged_ = *n;
    Event e = base("wakeups", "ok", "");
    e.kind = "counter";
    e.value = static_cast<std::int64_t>(*n);
    log_.write(e);
  }

  void register_write(Strategy& s, const std::string& grant, std::uint64_t fence) {
    Event inv = base("fenced_write", "invoke", grant);
    inv.fence = fence;
    log_.write(inv);
    if (auto w = s.write_registers(fence)) {  // made by the strategy's own process
      Event done = base("fenced_write", "info", grant);
      done.fence = fence;
      done.detail = w->detail;
      if (w->fenced_accepted) {
        done.phase = *w->fenced_accepted ? "ok" : "fail";
        done.seq = w->fenced_seq;
      }
      log_.write(done);
      emit("unfenced_write", "invoke", grant, {});
      Event ud = base("unfenced_write", w->unfenced_seq ? "ok" : "info", grant);
      if (w->unfenced_seq) ud.seq = *w->unfenced_seq;
      log_.write(ud);
      return;
    }
    auto f = resource_.cmd({"EVAL", kFencedWriteLua, "2", "reg:max", "reg:seq", std::to_string(fence)});
    Event done = base("fenced_write", "info", grant);
    done.fence = fence;
    if (f.good() && f.elements.size() == 2) {
      done.phase = f.elements[0].integer == 1 ? "ok" : "fail";
      done.seq = f.elements[1].integer;
    } else {
      done.detail = f.failure.empty() ? f.str : f.failure;
    }
    log_.write(done);
    emit("unfenced_write", "invoke", grant, {});
    auto u = resource_.cmd({"EVAL", kUnfencedWriteLua, "1", "ureg:seq"});
    Event ud = base("unfenced_write", u.good() ? "ok" : "info", grant);
    if (u.good()) ud.seq = u.integer;
    log_.write(ud);
  }

  // Proof for the clock-jump faults: this process saw its wall clock move
  // against the monotonic one.
  void check_clock() {
    const auto now = wall_minus_mono_ms();
    if (std::abs(now - clock_base_) > 1000) {
      Event e = base("clock", "ok", "");
      e.kind = "wall-offset";
      e.value = now - clock_base_;
      e.detail = "this process's wall clock moved " + std::to_string(now - clock_base_) + " ms";
      log_.write(e);
      clock_base_ = now;
    }
  }

  void parse_failpoints(const std::string& spec) {
    std::stringstream ss(spec);
    std::string item;
    while (std::getline(ss, item, ',')) {
      const auto eq = item.find('=');
      const auto colon = item.find(':', eq == std::string::npos ? 0 : eq);
      if (eq == std::string::npos || colon == std::string::npos) continue;
      failpoints_[item.substr(0, eq)] = {item.substr(eq + 1, colon - eq - 1), std::stod(item.substr(colon + 1))};
    }
  }

  void failpoint(const char* name) {
    auto it = failpoints_.find(name);
    if (it == failpoints_.end()) return;
    if (std::uniform_real_distribution<double>(0, 1)(rng_) >= it->second.second) return;
    Event e = base("failpoint", "ok", "");
    e.kind = name;
    e.detail = it->second.first;
    log_.write(e);
    if (it->second.first == "kill") ::raise(SIGKILL);
    if (it->second.first == "pause") ::raise(SIGSTOP);  // the nemesis resumes us
  }

  Event base(const char* op, const char* phase, const std::string& grant) {
    Event e;
    e.t = mono_ns();
    e.proc = a_.proc;
    e.inc = a_.inc;
    e.pid = ::getpid();
    e.op = op;
    e.phase = phase;
    e.grant = grant;
    return e;
  }

  void emit(const char* op, const char* phase, const std::string& grant, std::optional<std::int64_t> value,
            const std::string& detail = {}) {
    Event e = base(op, phase, grant);
    e.value = value;
    e.detail = detail;
    log_.write(e);
  }

  std::int64_t uniform(std::int64_t max) {
    if (max <= 0) return 0;
    return std::uniform_int_distribution<std::int64_t>(0, max)(rng_);
  }
  static void sleep_ms(std::int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

  WorkerArgs a_;
  HistoryWriter log_;
  SlotTable slots_;
  Slot& slot_;
  std::mt19937_64 rng_;
  SyncRedis resource_;
  std::map<std::string, std::pair<std::string, double>> failpoints_;
  std::uint64_t wakeups_logged_ = 0;
  std::int64_t clock_base_ = 0;
};

}  // namespace

int worker_main(const WorkerArgs& args) {
  struct sigaction sa {};
  sa.sa_handler = on_term;
  ::sigaction(SIGTERM, &sa, nullptr);
  // hiredis writes with plain write(2): a connection reset by the proxy
  // must be an error reply, not a dead worker.
  ::signal(SIGPIPE, SIG_IGN);
  try {
    Worker w(args);
    return w.run();
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "worker %s: %s\n", args.proc.c_str(), ex.what());
    return 1;
  }
}

}  // namespace torture

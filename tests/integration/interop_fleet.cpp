#include "integration/interop_fleet.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <sstream>

namespace dlock::test::interop {
namespace {

std::vector<Event> read_log(SyncRedis& redis) {
  std::istringstream in(redis.cmd({"LRANGE", kLog, "0", "-1"}));
  std::vector<Event> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    Event e;
    f >> e.kind >> e.side >> e.pid >> e.ns >> e.fence;
    out.push_back(e);
  }
  return out;
}

long long mono_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// A dlock service: the same loop as the peers' workers.
int dlock_worker(const Fleet& f) {
  ClientOptions o;
  o.logger = [](LogLevel, std::string_view) {};
  auto client = Client::connect(f.dlock_url, o);
  SyncRedis redis(f.log_port);
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(f.seconds));
  int grants = 0;
  while (Clock::now() < end) {
    auto lk = client.acquire(f.name, std::chrono::duration_cast<milliseconds>(end - Clock::now()) + 2s, f.lock);
    if (!lk.ok()) {
      if (lk.status().code() == Errc::timeout) continue;
      std::fprintf(stderr, "dlock worker: %s\n", lk.status().to_string().c_str());
      return 4;
    }
    ++grants;
    const std::string me = " dlock " + std::to_string(::getpid()) + " ";
    redis.cmd({"RPUSH", kLog, "start" + me + std::to_string(mono_ns()) + " " + std::to_string(lk->fence())});
    const std::string cur = redis.cmd({"GET", kCounter});
    const long long v = cur == "(nil)" ? 0 : std::stoll(cur);
    std::this_thread::sleep_for(milliseconds(std::uniform_int_distribution<int>(0, 20)(rng)));
    redis.cmd({"SET", kCounter, std::to_string(v + 1)});
    redis.cmd({"RPUSH", kLog, "end" + me + std::to_string(mono_ns())});
    if (Status s = lk->release(); !s.ok()) {
      std::fprintf(stderr, "dlock worker: release: %s\n", s.to_string().c_str());
      return 5;
    }
    std::this_thread::sleep_for(milliseconds(std::uniform_int_distribution<int>(0, 20)(rng)));  // a service's pace
  }
  return grants > 0 ? 0 : 3;
}

}  // namespace

Verdict judge(const std::vector<Event>& log) {
  Verdict v;
  const Event* holder = nullptr;
  const Event* last_end = nullptr;
  std::uint64_t last_fence = 0;
  for (const Event& e : log) {
    if (e.kind == "start") {
      ++v.starts;
      ++v.grants[e.side];
      if (holder != nullptr) {
        if (v.overlaps++ == 0)
          v.first_overlap = e.side + " " + std::to_string(e.pid) + " started while " + holder->side + " " +
                            std::to_string(holder->pid) + " held";
      }
      if (e.side == "dlock") {
        if (e.fence <= last_fence) v.dlock_fences_increase = false;
        last_fence = e.fence;
      }
      if (last_end != nullptr)
        v.handovers_ms[last_end->side + " -> " + e.side].push_back(static_cast<double>(e.ns - last_end->ns) / 1e6);
      holder = &e;
      last_end = nullptr;
    } else if (e.kind == "end") {
      ++v.ends;
      if (holder != nullptr && holder->pid == e.pid) holder = nullptr;
      last_end = &e;
    } else if (e.kind == "killed") {
      if (holder != nullptr && holder->pid == e.pid) {
        holder = nullptr;
        ++v.kills_in_hold;
      }
      last_end = nullptr;  // the next grant waited for the lease, not a release
    }
  }
  return v;
}

double median(std::vector<double> xs) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

std::optional<Peer> python_peer(const std::string& side, const std::string& module, const std::string& script) {
  // Debian's python3-* modules are /usr/bin/python3's (another python3 may
  // come first in PATH).
  const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  if (run({python, "-c", "import " + module}, 20s).exit_code != 0) return std::nullopt;
  return Peer{side, {python, std::string(DLOCK_PEERS_DIR) + "/" + script}, {}};
}

Verdict run_mixed_fleet(const Fleet& f) {
  struct Proc {
    pid_t pid;
    std::string side;
    bool killed = false;
  };
  std::vector<Proc> procs;
  // dlock's workers first, forked before this process has any client.
  for (int i = 0; i < f.procs; ++i) procs.push_back({fork_child([&] { return dlock_worker(f); }), "dlock"});
  for (int i = 0; i < f.procs; ++i) {
    std::vector<std::string> argv = f.peer.command;
    argv.insert(argv.end(), f.peer_args.begin(), f.peer_args.end());
    procs.push_back({spawn(argv, f.peer.env).pid, f.peer.side});
  }

  SyncRedis redis(f.log_port);
  // Kill a holder of each side in turn: one that has logged its start and
  // not its end holds the lock now (killed after its write of the start).
  const auto run_end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(f.seconds));
  std::this_thread::sleep_for(std::chrono::duration<double>(f.seconds / (f.kills + 2)));
  int killed = 0;
  for (int k = 0; k < f.kills && Clock::now() < run_end - 2s; ++k) {
    const std::string want = k % 2 == 0 ? "dlock" : f.peer.side;
    const auto give_up = Clock::now() + 3s;
    while (Clock::now() < give_up) {
      std::istringstream last(redis.cmd({"LINDEX", kLog, "-1"}));
      Event e;
      last >> e.kind >> e.side >> e.pid;
      auto p = std::find_if(procs.begin(), procs.end(), [&](const Proc& x) { return x.pid == e.pid; });
      if (e.kind == "start" && e.side == want && p != procs.end() && !p->killed) {
        ::kill(p->pid, SIGKILL);
        wait_exit(p->pid, 10s);
        p->killed = true;
        redis.cmd(
            {"RPUSH", kLog, "killed " + p->side + " " + std::to_string(p->pid) + " " + std::to_string(mono_ns())});
        ++killed;
        break;
      }
      std::this_thread::sleep_for(1ms);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(f.seconds / (f.kills + 2)));
  }

  for (Proc& p : procs) {
    if (p.killed) continue;
    EXPECT_EQ(wait_exit(p.pid, std::chrono::duration_cast<milliseconds>(run_end - Clock::now()) + 30s), 0)
        << p.side << " worker " << p.pid << " (3: a dlock worker never granted)";
  }
  const Verdict v = judge(read_log(redis));
  EXPECT_EQ(v.overlaps, 0) << v.first_overlap;
  EXPECT_TRUE(v.dlock_fences_increase) << "fences among dlock's holders must grow";
  EXPECT_GE(killed, std::min(f.kills, 1)) << "no holder was killed: the faults did not run";
  const std::string counted = redis.cmd({"GET", kCounter});
  const long long count = counted == "(nil)" ? 0 : std::stoll(counted);
  EXPECT_GE(count, v.ends) << "an update was lost";
  EXPECT_LE(count, v.starts);
  const auto grants = [&](const std::string& side) { return v.grants.count(side) ? v.grants.at(side) : 0; };
  EXPECT_GT(grants("dlock"), 0);
  EXPECT_GT(grants(f.peer.side), 0);
  std::printf("%s: %d critical sections (dlock %d, %s %d), %d holders killed\n", f.peer.side.c_str(), v.starts,
              grants("dlock"), f.peer.side.c_str(), grants(f.peer.side), v.kills_in_hold);
  for (const auto& [dir, ms] : v.handovers_ms)
    std::printf("  hand-over %s: median %.2f ms over %zu\n", dir.c_str(), median(ms), ms.size());
  if (f.woken_within.count() > 0)
    for (const std::string dir : {"dlock -> " + f.peer.side, f.peer.side + " -> dlock"}) {
      const auto it = v.handovers_ms.find(dir);
      EXPECT_NE(it, v.handovers_ms.end()) << "no hand-over " << dir;
      if (it == v.handovers_ms.end()) continue;
      EXPECT_LT(median(it->second), static_cast<double>(f.woken_within.count()))
          << dir << ": the waiter was not woken by the release";
    }
  return v;
}

}  // namespace dlock::test::interop

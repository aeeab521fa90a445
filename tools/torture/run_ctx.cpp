#include "run_ctx.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "strategies.hpp"

namespace torture {

char proc_state(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return '?';
  // "pid (comm) S ...": comm may hold spaces, so look after the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return '?';
  return line[close + 2];
}

std::int64_t RunCtx::uniform(std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

void RunCtx::log_fault(const std::string& phase, const std::string& kind, const std::string& target,
                       const std::string& detail, std::int64_t at) {
  Event e;
  e.t = at != 0 ? at : mono_ns();
  e.proc = "nemesis";
  e.pid = ::getpid();
  e.op = "fault";
  e.phase = phase;
  e.kind = kind;
  e.target = target;
  e.detail = detail;
  log->write(e);
}

void RunCtx::fault_start(const std::string& kind, const std::string& target, const std::string& proof,
                         std::int64_t at) {
  log_fault("invoke", kind, target, proof, at);
}
void RunCtx::fault_end(const std::string& kind, const std::string& target, const std::string& detail) {
  log_fault("ok", kind, target, detail);
}
void RunCtx::fault_instant(const std::string& kind, const std::string& target, const std::string& proof,
                           std::int64_t at) {
  log_fault("invoke", kind, target, proof, at);
}

void RunCtx::spawn(int w) {
  WorkerProc& p = procs[w];
  const WorkerArgs& a = p.args;
  std::string ports;
  for (auto port : a.lock_ports) ports += (ports.empty() ? "" : ",") + std::to_string(port);
  std::vector<std::string> args{self_exe,          "worker",
                                "--proc",          a.proc,
                                "--inc",           std::to_string(a.inc),
                                "--slot",          std::to_string(a.slot),
                                "--slots",         a.slots,
                                "--slot-count",    std::to_string(a.slot_count),
                                "--strategy",      a.strategy,
                                "--resource-port", std::to_string(a.resource_port),
                                "--ttl",           std::to_string(a.ttl_ms),
                                "--think",         std::to_string(a.think_ms),
                                "--think-min",     std::to_string(a.think_min_ms),
                                "--wait",          std::to_string(a.wait_ms),
                                "--history",       a.history,
                                "--seed",          std::to_string(a.seed),
                                "--failpoints",    a.failpoints,
                                "--permits",       std::to_string(a.permits)};
  if (!ports.empty()) args.insert(args.end(), {"--lock-ports", ports});
  if (!a.lock_url.empty()) args.insert(args.end(), {"--lock-url", a.lock_url});
  if (!a.sqlite_path.empty()) args.insert(args.end(), {"--sqlite", a.sqlite_path});
  if (!a.user.empty()) args.insert(args.end(), {"--user", a.user});
  p.wrap = wrap_worker ? wrap_worker(*this, w) : std::vector<std::string>{};
  args.insert(args.begin(), p.wrap.begin(), p.wrap.end());
  slots->at(w).pid.store(0);  // set by the worker once it runs
  const std::string log_path = a.history.substr(0, a.history.rfind('/')) + "/../" + a.proc + ".log";
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::setpgid(0, 0);
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (!clock_shim.empty()) {
      ::setenv("LD_PRELOAD", clock_shim.c_str(), 1);
      ::setenv("DLOCK_CLOCK_SHIM_FILE", p.clock->path().c_str(), 1);
    }
    std::vector<char*> argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  p.pid = pid;
  p.paused_by_nemesis = false;
  p.killed_by_nemesis = false;
  p.resume_at = 0;
}

int RunCtx::spawn_decoy(int w) {
  kill_decoy(w);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::execlp("sleep", "sleep", "100000", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  procs[w].decoy = pid;
  return pid;
}

void RunCtx::kill_decoy(int w) {
  int& d = procs[w].decoy;
  if (d <= 0) return;
  ::kill(d, SIGKILL);
  ::waitpid(d, nullptr, 0);
  d = -1;
}

int RunCtx::worker_pid(int w) const {
  const WorkerProc& p = procs[w];
  if (p.pid <= 0) return -1;
  if (p.wrap.empty()) return p.pid;
  const int own = slots->at(w).pid.load();
  return own > 0 ? own : -1;
}

void RunCtx::housekeeping() {
  const auto now = mono_ns();
  for (int w = 0; w < workers(); ++w) {
    WorkerProc& p = procs[w];
    if (p.pid > 0) {
      int status = 0;
      if (::waitpid(p.pid, &status, WNOHANG) == p.pid) {
        if (!p.killed_by_nemesis) {
          const std::string how = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                                      : "exited with " + std::to_string(WEXITSTATUS(status));
          fault_instant("crash", p.args.proc, "pid " + std::to_string(p.pid) + " " + how + " (not by the nemesis)");
        }
        p.pid = -1;
        p.respawn_at = now + 100'000'000;
        continue;
      }
      if (p.paused_by_nemesis) continue;
      const int self = worker_pid(w);
      if (self <= 0) continue;
      if (p.resume_at == 0 && proc_state(self) == 'T') {
        // Stopped itself at a failpoint: resume after 1.5-3 leases.
        const auto d = uniform(ttl * 3 / 2, ttl * 3);
        p.resume_at = now + d * 1'000'000;
        ++self_pauses;
        fault_start("failpoint-pause", p.args.proc,
                    "pid " + std::to_string(self) + " in state T (/proc/" + std::to_string(self) +
                        "/stat); resumed in " + std::to_string(d) + " ms");
      } else if (p.resume_at != 0 && now >= p.resume_at) {
        ::kill(self, SIGCONT);
        p.resume_at = 0;
        fault_end("failpoint-pause", p.args.proc, "SIGCONT");
      }
    } else if (running() && now >= p.respawn_at) {
      ++p.args.inc;
      spawn(w);
    }
  }
}

void RunCtx::idle(ms d) {
  const auto until = mono_ns() + d.count() * 1'000'000;
  for (;;) {
    housekeeping();
    const auto left = until - mono_ns();
    if (left <= 0) return;
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<std::int64_t>(left, 5'000'000)));
  }
}

int RunCtx::holder_granted_after(std::int64_t t, std::int64_t until_ns) {
  while (running() && mono_ns() < until_ns) {
    const int w = find_worker(Phase::holding, ms(200));
    // The time, then the phase again (set_phase writes them the other way
    // round): a holder leaving its hold is not taken for a fresh one.
    if (w >= 0 && slots->at(w).since_ns.load() > t &&
        slots->at(w).phase.load() == static_cast<std::int32_t>(Phase::holding))
      return w;
  }
  return -1;
}

int RunCtx::find_worker(Phase phase, ms patience) {
  const auto until = mono_ns() + patience.count() * 1'000'000;
  for (;;) {
    std::vector<int> candidates;
    for (int w = 0; w < workers(); ++w) {
      const WorkerProc& p = procs[w];
      if (p.pid <= 0 || p.paused_by_nemesis || p.resume_at != 0) continue;
      if (worker_pid(w) <= 0 || slots->at(w).pid.load() != worker_pid(w)) continue;  // not started yet
      if (slots->at(w).phase.load() == static_cast<std::int32_t>(phase)) candidates.push_back(w);
    }
    if (!candidates.empty())
      return candidates[static_cast<size_t>(uniform(0, static_cast<std::int64_t>(candidates.size()) - 1))];
    if (mono_ns() >= until) return -1;
    idle(ms(2));
  }
}

void RunCtx::pause(int w, ms d, const std::string& kind) {
  WorkerProc& p = procs[w];
  const int self = worker_pid(w);
  if (self <= 0) return;
  // A peer library runs in its helper process (strategies_peers.cpp): that
  // is the holder's library, frozen with it (its heartbeat, its watchdog).
  const int helper = runs_peer_helper(p.args.strategy) ? slots->at(w).child_pid.load() : 0;
  p.paused_by_nemesis = true;
  ::kill(self, SIGSTOP);
  if (helper > 0) ::kill(helper, SIGSTOP);
  char state = '?';
  for (int i = 0; i < 100 && (state = proc_state(self)) != 'T'; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  fault_start(kind, p.args.proc,
              "SIGSTOP pid " + std::to_string(self) +
                  (helper > 0 ? " and its peer helper " + std::to_string(helper) + " (state " +
                                    std::string(1, proc_state(helper)) + ")"
                              : std::string()) +
                  " for " + std::to_string(d.count()) + " ms; state " + std::string(1, state) + " in /proc/" +
                  std::to_string(self) + "/stat");
  idle(d);
  if (helper > 0) ::kill(helper, SIGCONT);
  if (p.pid > 0) ::kill(self, SIGCONT);
  p.paused_by_nemesis = false;
  fault_end(kind, p.args.proc, "SIGCONT");
}

void RunCtx::kill(int w) {
  WorkerProc& p = procs[w];
  if (p.pid <= 0) return;
  p.killed_by_nemesis = true;
  const int pid = p.pid;
  // Dated from before the signal: the process is dead soon after, and a
  // lock that frees itself at its holder's death (SQLite) may be granted
  // again before the reap below returns.
  const std::int64_t at = mono_ns();
  if (const int self = worker_pid(w); self > 0 && self != pid) ::kill(self, SIGKILL);  // then its wrapper
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  fault_instant("kill", p.args.proc,
                "SIGKILL pid " + std::to_string(pid) + "; reaped, " +
                    (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status)) : "exited"),
                at);
  p.pid = -1;
  p.respawn_at = mono_ns() + 100'000'000;
}

void RunCtx::stop_workers() {
  // To the worker itself: a wrapper would die of SIGTERM and take it along.
  for (int w = 0; w < workers(); ++w)
    if (const int self = worker_pid(w); self > 0) {
      ::kill(self, SIGCONT);
      ::kill(self, SIGTERM);
    }
  // Workers finish their iteration (an acquire waits at most wait_ms).
  const auto deadline = mono_ns() + (procs.empty() ? 0 : procs[0].args.wait_ms + 5000) * 1'000'000;
  for (auto& p : procs) {
    while (p.pid > 0) {
      int status = 0;
      if (::waitpid(p.pid, &status, WNOHANG) == p.pid) {
        p.pid = -1;
        break;
      }
      if (mono_ns() > deadline) {
        ::kill(p.pid, SIGKILL);
        ::waitpid(p.pid, &status, 0);
        p.pid = -1;
        break;
      }
      if (const int self = worker_pid(static_cast<int>(&p - procs.data())); self > 0)
        ::kill(self, SIGCONT);  // a failpoint may have stopped it again
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  for (int w = 0; w < workers(); ++w) kill_decoy(w);
}

}  // namespace torture

// W3 as the SQL and ZooKeeper comparisons run it: processes taking turns on
// one dlock::Mutex, each critical section a counter in a file (read, +1,
// write). Its grants and releases, merged across the processes, tell how
// fast the lock passes from one holder to the next.
#pragma once

#include <dlock/dlock.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harness.hpp"

namespace dlock::bench {

struct Handoff {
  double cs_per_s = 0;
  double p50_us = 0, p99_us = 0;  // a release to the next holder's grant, across processes
  double same_holder = 0;         // the fraction of grants going to the previous holder
  double wakeups_per_release = 0;
  long long lost = 0;  // updates of the counter lost: the lock failed
};

// Forks `procs` workers, each with a client of its own on `url`, and runs
// them for `seconds`; their files go in `dir`.
Handoff measure_handoff(const std::string& url, const ClientOptions& options, const std::string& dir, double seconds,
                        int procs);

// One worker's lock, made in the worker (after the fork): dlock's Mutex,
// or a limit speaking the store's protocol by hand.
class Turns {
 public:
  virtual ~Turns() = default;
  virtual void lock() = 0;
  virtual void unlock() = 0;
  virtual long long wakeups() const { return 0; }  // 0: not counted
};
// The same, with a worker's lock from `make` (it throws if it cannot).
Handoff measure_handoff(const std::function<std::unique_ptr<Turns>()>& make, const std::string& dir, double seconds,
                        int procs);

// W2: `threads` threads sharing one client on `url`, each taking and
// releasing its own names for `seconds`: pairs per second. Throws if a
// pair fails.
double shared_client_pairs(const std::string& url, const ClientOptions& options, double seconds, int threads);

// W3 over the reps: the medians, lost updates summed.
class HandoffReps {
 public:
  void add(const Handoff& h);
  Handoff median() const;
  long long lost() const { return lost_; }
  // "W3, <procs> processes on one lock" and the medians on a line, wake-ups
  // per hand-off among them if `wakeups`.
  void print(int procs, bool wakeups) const;
  // "  <label>: " and the medians on a line, under print's.
  void print_beside(const char* label) const;
  // The fields of the JSON result, named `prefix` + w3's names' ends.
  void add_json(JsonLine& j, bool wakeups, const std::string& prefix = "w3_") const;

 private:
  std::vector<double> cs_, p50_, p99_, same_, wakeups_;
  long long lost_ = 0;
};

}  // namespace dlock::bench

// The fault scenarios of the correctness test plan, each with the nemesis
// that drives it and what each strategy is documented to show under it.
#ifndef DLOCK_TORTURE_SCENARIOS_HPP_
#define DLOCK_TORTURE_SCENARIOS_HPP_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analysis.hpp"

namespace torture {

class RunCtx;

// Which lock set-ups a scenario applies to: a fault on "the lock server" of
// a single server, on nodes of a Redlock set, or on clients and the network
// (both).
enum class Topology { any, single, redlock };

struct Scenario {
  std::string name;
  std::string summary;     // one line: the fault
  std::string failpoints;  // given to every worker
  bool aof_always = false; // lock server persists every write
  std::function<void(RunCtx&)> nemesis;
  // Naive strategies listed here must be caught in this scenario.
  std::vector<std::string> must_catch;
  // For dlock: what the documentation allows here.
  Expectation dlock;
  // The lock server has an asynchronous replica, replicating through the
  // proxy's "replication" link.
  bool replica = false;
  Topology topology = Topology::any;
  // Longest think inside the critical section, in ms (0: the run's own), for
  // faults that need a holder that holds for a while.
  std::int64_t think_ms = 0;
  // For redlock, when it differs from `dlock`.
  std::optional<Expectation> redlock = std::nullopt;
};

// Whether `strategy` runs in `s` (a Redlock scenario needs several servers).
bool applies(const Scenario& s, const std::string& strategy);

const std::vector<Scenario>& scenarios();
const Scenario* find_scenario(const std::string& name);  // nullptr if unknown

// The expectation for `strategy` in `s`. judged=false: a naive strategy
// outside the scenarios that must catch it, run for comparison only.
Expectation expectation_for(const Scenario& s, const std::string& strategy, bool* judged);

struct PlannedRun {
  std::string scenario;
  std::string strategy;
};
// Every scenario on dlock and on redlock where it applies, and each naive
// strategy where it must fail.
std::vector<PlannedRun> short_suite();
// Every scenario on every strategy it applies to.
std::vector<PlannedRun> full_suite();

}  // namespace torture

#endif  // DLOCK_TORTURE_SCENARIOS_HPP_

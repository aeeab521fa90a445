// The fault scenarios of the correctness test plan, each with the nemesis
// that drives it and what each strategy is documented to show under it.
#ifndef DLOCK_TORTURE_SCENARIOS_HPP_
#define DLOCK_TORTURE_SCENARIOS_HPP_

#include <functional>
#include <string>
#include <vector>

#include "analysis.hpp"

namespace torture {

class RunCtx;

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
};

const std::vector<Scenario>& scenarios();
const Scenario* find_scenario(const std::string& name);  // nullptr if unknown

// The expectation for `strategy` in `s`. judged=false: a naive strategy
// outside the scenarios that must catch it, run for comparison only.
Expectation expectation_for(const Scenario& s, const std::string& strategy, bool* judged);

struct PlannedRun {
  std::string scenario;
  std::string strategy;
};
// Every scenario on dlock, and each naive strategy where it must fail.
std::vector<PlannedRun> short_suite();
// Every scenario on every strategy.
std::vector<PlannedRun> full_suite();

}  // namespace torture

#endif  // DLOCK_TORTURE_SCENARIOS_HPP_

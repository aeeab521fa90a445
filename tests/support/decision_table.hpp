// The lock decisions as data (tests/decisions/locks.table, whose header says
// the format), read and run against any backend through the Backend
// interface: each step is one call, its answer compared with the row.
#ifndef DLOCK_TESTS_SUPPORT_DECISION_TABLE_HPP_
#define DLOCK_TESTS_SUPPORT_DECISION_TABLE_HPP_

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend.hpp"
#include "support/backend_driver.hpp"

namespace dlock::test::table {

enum class Op { acquire, release, abandon, renew, inspect };

struct Step {
  int line = 0;           // in the table file
  std::string text;       // as written
  std::optional<int> at;  // ticks after the case began
  std::string who;        // "a1"; "-" for inspect
  Op op = Op::acquire;
  std::string name = "k";
  detail::LockMode mode = detail::LockMode::exclusive;
  unsigned permits = 0;
  bool queued = false;
  bool line_abandon = false;  // abandon's `line`
  bool in_doubt = false;
  std::optional<unsigned> held;
  std::optional<int> lease;  // ticks
  std::optional<int> tomb;   // ticks
  std::string outcome;
  std::map<std::string, std::string> checks;  // "depth" -> "2", "fence>" -> "a1", ...
};

struct Case {
  int line = 0;
  std::string title;
  std::set<std::string> needs;  // declared and found from the steps
  std::vector<Step> steps;
};

// The cases of a table file. Throws std::runtime_error naming the line of
// anything it cannot read.
std::vector<Case> load(const std::string& path);

// tests/decisions/locks.table (DLOCK_DECISION_TABLE, set by the test
// targets), read once.
const std::vector<Case>& locks_table();

// The `needs` words a backend with these capabilities offers.
std::set<std::string> offered(const detail::Capabilities& caps);

// Runs one case on `driver` (names prefixed by `prefix`, unique per run).
// Returns what disagreed with the table, one line each ("line N: ...");
// empty when the backend decided every step as written.
std::vector<std::string> run(const Case& c, BackendDriver& driver, const std::string& prefix,
                             std::chrono::milliseconds tick);

}  // namespace dlock::test::table

#endif  // DLOCK_TESTS_SUPPORT_DECISION_TABLE_HPP_

// The decision table (tests/decisions/locks.table) run against every backend
// of the build, each on its real server, call by call below the client: a
// backend whose code decides a case otherwise fails naming the case and the
// step. Cases that need what a backend does not offer (expiry on ZooKeeper,
// lines on Redlock) are skipped there, and counted. (The unit tests run it
// on the fake alone: unit/lock_table_test.cpp.)
#include "support/decision_table.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <iostream>

#include "backend_envs.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

const std::vector<table::Case>& cases() { return table::locks_table(); }

class DecisionTable : public ::testing::TestWithParam<Backend> {};

TEST_P(DecisionTable, EveryCaseIsDecidedAsWritten) {
  auto env = GetParam().make();
  BackendDriver driver(env->maker());
  const auto offered = table::offered(driver.capabilities());
  int ran = 0, skipped = 0;
  for (std::size_t i = 0; i < cases().size(); ++i) {
    const table::Case& c = cases()[i];
    if (!std::includes(offered.begin(), offered.end(), c.needs.begin(), c.needs.end())) {
      ++skipped;
      continue;
    }
    ++ran;
    const std::string prefix = "dt" + std::to_string(i) + "-" + std::to_string(::getpid());
    for (const std::string& failure : table::run(c, driver, prefix, 150ms))
      ADD_FAILURE() << "case '" << c.title << "' (line " << c.line << "): " << failure;
  }
  std::cout << GetParam().name << ": " << ran << " cases decided, " << skipped << " skipped for what it lacks\n";
  EXPECT_GT(ran, 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, DecisionTable, ::testing::ValuesIn(kBackends),
                         [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace dlock::test

// The decision table (tests/decisions/locks.table) read, and run on the fake
// backend: the C++ machines (core/lock_row, core/lock_line) without a server.
// integration/decision_table_test.cpp runs it on every real backend.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "support/backend_driver.hpp"
#include "support/decision_table.hpp"
#include "support/fake_backend.hpp"
#include "support/temp_dir.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

const std::vector<table::Case>& cases() { return table::locks_table(); }

TEST(LockTable, EveryCaseIsRead) {
  ASSERT_GE(cases().size(), 20u);
  for (const auto& c : cases()) EXPECT_FALSE(c.steps.empty()) << c.title;
}

TEST(LockTable, AMalformedRowIsRefusedNamingItsLine) {
  TempDir dir;
  const std::string path = dir.file("bad.table");
  std::ofstream(path) << "case one\na1 acquire x -> granted\n\na1 acquire q -> granted\n";
  try {
    table::load(path);
    FAIL() << "a mode 'q' was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("line 4"), std::string::npos) << e.what();
  }
}

TEST(LockTable, TheFakeDecidesEveryCaseAsWritten) {
  dlock::testing::FakeServer server;
  server.caps.lines = true;
  BackendDriver driver(server.maker());
  for (std::size_t i = 0; i < cases().size(); ++i)
    for (const std::string& failure : table::run(cases()[i], driver, "c" + std::to_string(i), 100ms))
      ADD_FAILURE() << "case '" << cases()[i].title << "' (line " << cases()[i].line << "): " << failure;
}

}  // namespace
}  // namespace dlock::test

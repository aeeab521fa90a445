// Helpers of the tests that drive ClientCore over the fake backend.
#ifndef DLOCK_TESTS_SUPPORT_FAKE_CLIENT_HPP_
#define DLOCK_TESTS_SUPPORT_FAKE_CLIENT_HPP_

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "client_core.hpp"
#include "support/fake_backend.hpp"

namespace dlock::testing {

// Polls `cond` for up to 5 s (the conditions are reached in milliseconds).
template <class F>
bool eventually(F cond) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return cond();
}

// A client of `server` (each has its own backend, as a process would).
inline Client connect(FakeServer& server, ClientOptions options = {}, detail::ClientCore::ClockFn clock = {}) {
  auto core = detail::ClientCore::connect_with(server.maker(), std::move(options), std::move(clock));
  EXPECT_TRUE(core.ok()) << core.status().to_string();
  return detail::ClientFactory::make(std::move(core.value()));
}

}  // namespace dlock::testing

#endif  // DLOCK_TESTS_SUPPORT_FAKE_CLIENT_HPP_

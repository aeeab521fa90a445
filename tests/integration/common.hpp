// Shared helpers of the integration tests.
#ifndef DLOCK_TESTS_INTEGRATION_COMMON_HPP_
#define DLOCK_TESTS_INTEGRATION_COMMON_HPP_

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <dlock/dlock.hpp>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/process.hpp"
#include "support/redis_server.hpp"
#include "support/sync_redis.hpp"

namespace dlock::test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Collects the library's log lines instead of printing them.
struct LogSink {
  std::mutex mu;
  std::vector<std::string> lines;
  // Taken once more before the lines go: a client's I/O thread that logged
  // last (one shutting down on its own, after its last handle went in a
  // callback) is then ordered before their destruction.
  ~LogSink() { std::lock_guard lk(mu); }
  Logger logger() {
    return [this](LogLevel, std::string_view m) {
      std::lock_guard lk(mu);
      lines.emplace_back(m);
    };
  }
  bool contains(const std::string& needle) {
    std::lock_guard lk(mu);
    for (const auto& l : lines)
      if (l.find(needle) != std::string::npos) return true;
    return false;
  }
};

inline ClientOptions quiet(LogSink& sink) {
  ClientOptions o;
  o.logger = sink.logger();
  return o;
}

// Polls pred every 5 ms until it holds or `limit` passes.
inline bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds limit) {
  auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

// The number a file holds (0 when it is missing or empty).
inline long long read_number(const std::string& path) {
  std::ifstream in(path);
  long long v = 0;
  in >> v;
  return v;
}

// The non-empty lines of a reply (SyncRedis and redis-cli join an array's
// elements with newlines).
inline std::vector<std::string> reply_lines(const std::string& reply) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at < reply.size();) {
    const auto end = std::min(reply.find('\n', at), reply.size());
    if (end > at) out.push_back(reply.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

inline long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// Figures the closing notes quote: printed as "[measure] name=value".
inline void measure(const std::string& name, long long value, const std::string& unit = "ms") {
  std::cout << "[measure] " << name << "=" << value << unit << std::endl;
}

// Blocks `client`'s I/O thread inside a completion handler, for up to 3 s,
// and runs `call` on this thread meanwhile; true if `call` returned while
// the I/O thread was still blocked (so it did not need that thread: the
// blocking fast path). The handler lets go as soon as `call` returns.
inline bool returns_beside_a_blocked_io_thread(Client& client, const std::function<void()>& call) {
  std::promise<void> entered, left, returned;
  std::atomic<bool> over{false};
  auto call_returned = returned.get_future();
  client.async_acquire("test/io-blocker", std::chrono::milliseconds(0), {}, [&](Result<Lease> r) {
    entered.set_value();
    call_returned.wait_for(std::chrono::seconds(3));
    over = true;
    { Result<Lease> gone = std::move(r); }  // released before the caller goes on
    left.set_value();
  });
  entered.get_future().wait();
  call();
  const bool beside = !over.load();
  returned.set_value();
  left.get_future().wait();
  // A call through the I/O thread: the handler above has ended there, with
  // whatever it held of the client (else the client's last reference could
  // end on that thread when the test drops the client).
  (void)client.inspect("test/io-blocker");
  return beside;
}

inline LockOptions fast_watchdog(milliseconds lease = 1000ms, milliseconds interval = 300ms) {
  LockOptions o;
  o.watchdog_lease = lease;
  o.renew_interval = interval;
  return o;
}

}  // namespace dlock::test

#endif  // DLOCK_TESTS_INTEGRATION_COMMON_HPP_

// Prints the Prometheus exposition of a real session against a SQLite file
// in a private directory, for metrics_check.py to read with the Prometheus
// client library's parser. What the session does (and so what the check
// expects):
//   client   one client: 2 grants (one with a 50 ms fixed lease that runs out:
//            1 loss, expired), 1 busy try, 1 wait timed out (100 ms), 1 wait
//            granted, watchdog renewals, no lease held at the end; labelled service="metrics \"check\"\n"
//   clients  that client and a second one (its holder: 2 grants, 1 lease held),
//            told apart by client="waiter" and client="holder"
//   locks    the gauges of a held lock (named job "1"\) and a free one
// Exit status 0, or 1 with a message on stderr when a step failed; 77 when
// the build has no SQLite.
#include <chrono>
#include <cstdio>
#include <dlock/dlock.hpp>
#include <dlock/metrics.hpp>
#include <future>
#include <iostream>
#include <string>
#include <thread>

#include "support/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;

[[noreturn]] void fail(const std::string& what) {
  std::cerr << "metrics session: " << what << '\n';
  std::exit(1);
}

template <class F>
bool eventually(F cond) {
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return cond();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "client";
  if (mode != "client" && mode != "clients" && mode != "locks") {
    std::cerr << "usage: " << argv[0] << " client|clients|locks\n";
    return 2;
  }
  dlock::test::TempDir dir;
  const std::string url = "sqlite://" + dir.file("locks.db");
  auto connected = dlock::Client::try_connect(url);
  if (!connected.ok()) {
    if (connected.status().message().find("unsupported URL scheme") != std::string::npos) return 77;
    fail(connected.status().to_string());
  }
  dlock::Client holder = *connected;
  dlock::Client client = dlock::Client::connect(url);
  const std::string lock = "job \"1\"\\";

  auto held = holder.acquire(lock, 0ms);
  if (!held.ok()) fail("holder: " + held.status().to_string());
  if (mode == "locks") {
    auto info = holder.inspect(lock);
    auto free_info = holder.inspect("free");
    if (!info.ok() || !free_info.ok()) fail("inspect failed");
    const std::vector<dlock::InspectedLock> locks = {{lock, *info}, {"free", *free_info}};
    std::cout << dlock::locks_to_prometheus(locks);
    return 0;
  }

  if (client.try_acquire(lock).code() != dlock::Errc::busy) fail("the try was not answered busy");
  if (client.acquire(lock, 100ms).code() != dlock::Errc::timeout) fail("the wait did not time out");
  const auto busy_before = client.stats().busy_answers;
  dlock::LockOptions watchdog;
  watchdog.watchdog_lease = 300ms;
  watchdog.renew_interval = 50ms;
  auto waiter = std::async(std::launch::async, [&] { return client.acquire(lock, 20s, watchdog); });
  if (!eventually([&] { return client.stats().busy_answers > busy_before; })) fail("the waiter never waited");
  if (!held->release().ok()) fail("release failed");
  auto granted = waiter.get();
  if (!granted.ok()) fail("the wait was not granted: " + granted.status().to_string());
  if (!eventually([&] { return client.stats().renewals >= 2; })) fail("no renewals");

  dlock::LockOptions fixed;
  fixed.lease = 50ms;
  // A wait, not a try: a try that meets the file's write lock taken (the
  // watchdog renewing the other hold) answers busy, as documented.
  auto short_lease = client.acquire("short", 2s, fixed);
  if (!short_lease.ok()) fail("short lease: " + short_lease.status().to_string());
  if (!eventually([&] { return short_lease->lost(); })) fail("the fixed lease was never lost");
  if (!granted->release().ok()) fail("release of the granted wait failed");
  (void)short_lease->release();  // not held any more: only forgotten here

  dlock::PrometheusOptions options;
  options.labels = {{"service", "metrics \"check\"\n"}};
  if (mode == "client") {
    std::cout << dlock::to_prometheus(client.stats(), options);
    return 0;
  }
  auto again = holder.acquire(lock, 0ms);
  if (!again.ok()) fail("holder again: " + again.status().to_string());
  const std::vector<dlock::LabeledStats> clients = {{client.stats(), {{"client", "waiter"}}},
                                                    {holder.stats(), {{"client", "holder"}}}};
  std::cout << dlock::to_prometheus(clients, options);
  return 0;
}

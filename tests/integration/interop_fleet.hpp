// A mixed fleet on one lock: dlock processes beside processes of a peer
// library that keeps the same layout (redis-py's Lock and npm redlock on a
// Redis name, kazoo's Lock on a ZooKeeper path), holders SIGKILLed on both
// sides. Every critical section logs "start" and "end" to a Redis list (the
// log server's order is the order of events) and bumps a counter there with
// a non-atomic GET and SET: an overlap shows in the log as a start while
// another process holds, and in the count.
#ifndef DLOCK_TESTS_INTEGRATION_INTEROP_FLEET_HPP_
#define DLOCK_TESTS_INTEGRATION_INTEROP_FLEET_HPP_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "integration/common.hpp"

namespace dlock::test::interop {

inline constexpr const char* kLog = "interop:log";
inline constexpr const char* kCounter = "interop:counter";

struct Event {
  std::string kind;  // start, end, killed
  std::string side;  // dlock, redis-py, redlock, kazoo
  pid_t pid = 0;
  long long ns = 0;  // CLOCK_MONOTONIC: steady_clock, time.monotonic_ns, hrtime
  std::uint64_t fence = 0;
};

// What the log says, in the server's order.
struct Verdict {
  int starts = 0, ends = 0, overlaps = 0, kills_in_hold = 0;
  bool dlock_fences_increase = true;
  std::map<std::string, int> grants;                        // by side
  std::map<std::string, std::vector<double>> handovers_ms;  // "from -> to": end to next start
  std::string first_overlap;
};
Verdict judge(const std::vector<Event>& log);
double median(std::vector<double> xs);

// A peer library's worker: its interpreter and script, and its environment.
struct Peer {
  std::string side;
  std::vector<std::string> command;
  Env env;
};
// Debian's /usr/bin/python3 with `module` importable, running `script`
// (tests/integration/peers/); nullopt when the module is missing (the
// project's set-up installs it: scripts/test).
std::optional<Peer> python_peer(const std::string& side, const std::string& module, const std::string& script);

struct Fleet {
  Peer peer;
  // The peer's arguments after its script. Its worker appends to kLog and
  // kCounter on the log server, as dlock's does (interop_fleet.cpp).
  std::vector<std::string> peer_args;
  std::string dlock_url;
  std::string name;
  LockOptions lock;  // dlock's workers'
  int log_port = 0;  // a Redis server for the log and the counter
  int procs = 3;     // of each side
  double seconds = 8;
  int kills = 2;  // holders SIGKILLed, the sides in turn
  // Both sides are woken by the other's releases (Redisson's unlock
  // message, kazoo's watches): a hand-over across sides is then asserted
  // to take well under this (a third of the lease a poll would wait for);
  // 0: not asserted (a polling peer).
  milliseconds woken_within{0};
};

// Runs the fleet, asserts (no overlap, no lost update, fences growing among
// dlock's holders, every process exited well, each side granted, a holder
// killed) and prints the grants and hand-over medians.
Verdict run_mixed_fleet(const Fleet& fleet);

}  // namespace dlock::test::interop

#endif  // DLOCK_TESTS_INTEGRATION_INTEROP_FLEET_HPP_

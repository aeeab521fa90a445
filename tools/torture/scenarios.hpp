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

// The lock set-ups a scenario applies to, as a mask: a fault on clients
// applies to all; a fault on the network to those with a server behind the
// proxy; a fault on a Redis server to Redis and Redlock; and so on.
enum Setup : unsigned {
  kRedis = 1,       // one redis-server
  kRedlock = 2,     // five redis-servers
  kPostgres = 4,    // one PostgreSQL server
  kSqlite = 8,      // a file on this host, no server
  kZooKeeper = 16,  // a three-server ZooKeeper ensemble
  kCli = 32,        // `dlock run NAME -- CMD` on a SQLite file; not in kEvery
  kCluster = 64,    // a Redis Cluster: 3 masters, a replica each
  kSentinel = 128,  // a master, its replica and three sentinels
  kEtcd = 256,      // a three-member etcd cluster
  kRedisFamily = kRedis | kRedlock,
  kTopologies = kCluster | kSentinel,
  kNetworked = kRedis | kRedlock | kPostgres | kZooKeeper | kEtcd | kTopologies,
  kEvery = kNetworked | kSqlite,
};
unsigned setup_of(const std::string& strategy);

struct Scenario {
  std::string name;
  std::string summary;      // one line: the fault
  std::string failpoints;   // given to every worker
  bool aof_always = false;  // lock server persists every write
  std::function<void(RunCtx&)> nemesis;
  // Naive strategies listed here must be caught in this scenario.
  std::vector<std::string> must_catch;
  // For dlock: what the documentation allows here.
  Expectation dlock;
  // The lock server has an asynchronous replica, replicating through the
  // proxy's "replication" link.
  bool replica = false;
  unsigned setups = kEvery;
  // Longest think inside the critical section, in ms (0: the run's own), for
  // faults that need a holder that holds for a while.
  std::int64_t think_ms = 0;
  // The same in leases (0: not set), for holds meant to outlive the lease.
  double think_leases = 0;
  // The shortest think inside the critical section, in leases (0: none).
  double think_min_leases = 0;
  // For redlock, when it differs from `dlock`.
  std::optional<Expectation> redlock = std::nullopt;
  // Lock-server settings, "name=value" (PostgreSQL: -c name=value): faults
  // that live in a server's configuration.
  std::vector<std::string> server_settings = {};
  // Runs once the lock server is up, before any worker: roles, schemas.
  std::function<void(RunCtx&)> prepare = nullptr;
  // Worker w's command prefix, asked at every (re)spawn: unshare into other
  // namespaces; empty: none.
  std::function<std::vector<std::string>(RunCtx&, int)> wrap = nullptr;
  // Worker w's login: a PostgreSQL role, or etcd's "user:password"; "" or
  // unset: the superuser (PostgreSQL), none (etcd).
  std::function<std::string(int)> user = nullptr;
  // ZooKeeper: server 0's quorum and election links go through proxies
  // (RunCtx::peer_net); etcd: what the other members hear of member 0 goes
  // through one. Odd workers are clients of server 0 only.
  bool peer_proxies = false;
  // Worker processes, when the scenario needs its own number (a crowd);
  // 0: the run's.
  int workers = 0;
  // Strategies that wake one waiter per release: the expectation's crowd
  // bounds are judged on them only; the others' crowd costs are reported.
  std::vector<std::string> wakes_one = {};
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

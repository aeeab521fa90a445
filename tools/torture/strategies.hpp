// The lock strategies the verifier drives: dlock itself and the naive
// algorithms from the seed articles, each written as the articles give it, so
// the verifier can show where they break.
#ifndef DLOCK_TORTURE_STRATEGIES_HPP_
#define DLOCK_TORTURE_STRATEGIES_HPP_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torture {

enum class Outcome { ok, fail, info };  // info: unknown, may have happened

struct AcquireResult {
  Outcome outcome = Outcome::fail;
  std::uint64_t fence = 0;  // 0: the strategy has no fencing token
  std::string detail;
};

// What a recipe strategy's last acquire asked for and what its holder does.
struct HoldPlan {
  std::string kind;    // Event::kind: fair, shared, exclusive, permit, leader; "" for a plain mutex
  bool writes = true;  // the holder writes the registers (not a reader, not a permit)
  int rounds = 1;      // rounds of read, think, write under the grant
};

struct ReleaseResult {
  Outcome outcome = Outcome::fail;
  std::string detail;
};

// What a strategy locks on: a Redis server (or a Redlock set), a PostgreSQL
// server, a ZooKeeper ensemble, an etcd cluster, or a SQLite file on this host
// (no server).
enum class LockServer { redis, postgres, sqlite, zookeeper, etcd };

struct StrategyConfig {
  // The whole dlock URL when the orchestrator writes it (a cluster or
  // Sentinel with its nat map); "": built from `host` and `ports`.
  std::string url;
  std::string host = "127.0.0.1";
  // The lock servers (through the proxies): one, or the Redlock masters.
  std::vector<std::uint16_t> ports;
  std::string sqlite_path;  // the lock file, for LockServer::sqlite
  std::string user;         // PostgreSQL role ("": postgres) or etcd "user:password" ("": none)
  // The worker's name: its PostgreSQL application_name, so the nemesis can
  // find its connections.
  std::string client_name;
  std::string key = "torture";  // the lock's name
  std::int64_t ttl_ms = 1000;
  // Called at named points inside an algorithm ("acquire:mid" between the
  // two commands of a non-atomic acquire, "release:mid" between the check
  // and the delete of a non-atomic release); the worker may pause or kill
  // its own process there.
  std::function<void(const char*)> failpoint;
  // The resource server (for strategies whose critical section runs in a
  // process of their own), and where they publish that process's pid.
  std::uint16_t resource_port = 0;
  std::function<void(int)> on_child;
  unsigned permits = 3;  // semaphore strategies: N
};

// The register writes of one critical section, when a strategy makes them
// itself (see Strategy::write_registers).
struct RegisterWrites {
  std::optional<bool> fenced_accepted;  // nullopt: outcome unknown
  std::int64_t fenced_seq = 0;
  std::optional<std::int64_t> unfenced_seq;  // nullopt: outcome unknown
  std::string detail;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  // Tries for up to `wait`. on_lost is called (from any thread) if the
  // strategy learns later that this grant was lost.
  virtual AcquireResult acquire(std::chrono::milliseconds wait, std::function<void()> on_lost) = 0;
  virtual ReleaseResult release() = 0;
  // Whether the holder still believes its grant is good: what a careful user
  // checks before writing. The naive algorithms have nothing to check.
  virtual bool still_valid() const { return true; }
  // Waiters of this client woken by a release notification so far; nullopt
  // for strategies that do not count them.
  virtual std::optional<std::uint64_t> wakeups() const { return std::nullopt; }
  // For a strategy whose critical section runs in another process (the
  // CLI's CMD): the fenced and unfenced register writes, made there.
  // nullopt: the worker makes them itself.
  virtual std::optional<RegisterWrites> write_registers(std::uint64_t /*fence*/) { return std::nullopt; }
  // The last acquire's plan (recipes); a plain mutex's by default.
  virtual HoldPlan plan() const { return {}; }
};

// The dlock URL of a lock server: redis:// (one server), redlock:// (more),
// postgres:// (through the proxy), sqlite://, zk://, etcd:// (the lease in
// whole seconds, rounded up).
std::string dlock_url(LockServer server, const StrategyConfig& config);

// Throws std::invalid_argument for an unknown name.
std::unique_ptr<Strategy> make_strategy(const std::string& name, const StrategyConfig& config);
const std::vector<std::string>& strategy_names();
// Whether this build reaches etcd (the etcd strategies are listed only then).
bool etcd_built();
// A mixed fleet's strategy, whose odd workers drive a peer library's helper
// process (strategies_peers.cpp; its pid is the worker slot's child_pid).
bool runs_peer_helper(const std::string& name);
bool is_naive(const std::string& name);
// How many lock servers the strategy uses, each behind its own proxy: 5
// for "redlock", 6 for "cluster" (3 masters, their replicas), 2 for
// "sentinel" (master, replica; the sentinels are reached directly), 3 for a
// ZooKeeper ensemble or an etcd cluster, 0 for SQLite, else 1.
int lock_nodes(const std::string& name);
LockServer lock_server_of(const std::string& name);
// The Redis topology of a strategy: "cluster", "sentinel", or "" (one
// server or Redlock's independent masters).
std::string redis_topology_of(const std::string& name);
// Whether the strategy reaches its one Redis server over TLS (dlock-tls:
// rediss://, the certificate verified; its proxy carries the TLS bytes).
bool tls_of(const std::string& name);

}  // namespace torture

#endif  // DLOCK_TORTURE_STRATEGIES_HPP_

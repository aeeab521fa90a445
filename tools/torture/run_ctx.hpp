// What a scenario's nemesis can do during a run: find workers by what they
// are doing, pause, kill and restart processes, drive the proxy and the
// clocks, and log every fault with the proof that it took effect.
#ifndef DLOCK_TORTURE_RUN_CTX_HPP_
#define DLOCK_TORTURE_RUN_CTX_HPP_

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "clock_control.hpp"
#include "common/etcd_cluster.hpp"
#include "common/redis_topology.hpp"
#include "common/sync_redis.hpp"
#include "common/zk_ensemble.hpp"
#include "history.hpp"
#include "pg_proc.hpp"
#include "proxy.hpp"
#include "server_proc.hpp"
#include "slots.hpp"
#include "worker.hpp"

namespace torture {

using dlock::tools::Reply;
using dlock::tools::SyncRedis;

struct WorkerProc {
  WorkerArgs args;
  int pid = -1;  // -1: dead, waiting to be respawned
  bool paused_by_nemesis = false;
  bool killed_by_nemesis = false;
  std::int64_t respawn_at = 0;  // ns
  std::int64_t resume_at = 0;   // ns, for a self-paused worker; 0: none
  std::unique_ptr<ClockControl> clock;
  // A command prefix (unshare into other namespaces): then `pid` is the
  // wrapper's, and the worker's own pid is the one it publishes in its slot.
  std::vector<std::string> wrap;
  int decoy = -1;  // see RunCtx::spawn_decoy
};

// One lock server with its own proxy (clients reach it only through the
// proxy), its wall-clock control and a direct admin connection. A run has one,
// or five for Redlock. On PostgreSQL, only the proxy is set (the server is
// RunCtx::pg); SQLite has none.
struct LockNode {
  std::unique_ptr<ClockControl> clock;
  std::unique_ptr<ServerProc> server;
  std::unique_ptr<SyncRedis> admin;
  std::unique_ptr<Proxy> proxy;
};

class RunCtx {
 public:
  using ms = std::chrono::milliseconds;

  // --- time -----------------------------------------------------------
  bool running() const { return mono_ns() < end_t; }
  // Sleeps `d` while keeping house: reaps and respawns workers, resumes
  // workers that stopped themselves at a failpoint.
  void idle(ms d);
  std::int64_t ttl_ms() const { return ttl; }
  std::int64_t uniform(std::int64_t lo, std::int64_t hi);

  // --- workers --------------------------------------------------------
  int workers() const { return static_cast<int>(procs.size()); }
  // A live, running worker in `phase`, waiting up to `patience` for one; -1
  // if none.
  int find_worker(Phase phase, ms patience);
  // A worker holding a grant made after `t` (mono ns), waiting while the
  // run lasts and until `until_ns`; -1 if none came.
  int holder_granted_after(std::int64_t t, std::int64_t until_ns = std::numeric_limits<std::int64_t>::max());
  const std::string& name(int w) const { return procs[w].args.proc; }
  // The worker process itself (not its wrapper); -1 if dead or not started.
  int worker_pid(int w) const;
  void pause(int w, ms d, const std::string& kind);  // SIGSTOP, idle d, SIGCONT
  void kill(int w);                                  // SIGKILL, respawned soon
  ClockControl& worker_clock(int w) { return *procs[w].clock; }
  // A process of the verifier's (sleep) standing for worker w: a holder
  // that misreads its own identity may record the decoy's. Replaces the
  // previous one; returns its pid.
  int spawn_decoy(int w);
  void kill_decoy(int w);

  // --- servers --------------------------------------------------------
  // Node 0 is "the lock server" of single-server scenarios; for Redlock it
  // is also the node that hands out fences.
  int node_count() const { return static_cast<int>(nodes.size()); }
  LockNode& node(int i) { return nodes.at(static_cast<std::size_t>(i)); }
  ServerProc& lock_server() { return *nodes[0].server; }
  SyncRedis& admin() { return *nodes[0].admin; }  // direct to node 0
  ClockControl& server_clock() { return *nodes[0].clock; }
  // The PostgreSQL lock server (strategies on PostgreSQL), else null; its
  // proxy is node 0's.
  PgProc* postgres() { return pg.get(); }
  // The ZooKeeper ensemble (strategies on ZooKeeper), else null; server i's
  // proxy is node i's.
  dlock::tools::ZooKeeperEnsemble* zookeeper() { return zk.get(); }
  // The etcd cluster (strategies on etcd), else null; member i's proxy is
  // node i's.
  dlock::tools::EtcdCluster* etcd_cluster() { return etcd.get(); }
  // Every node's proxy: a fault on a link cuts the client from all of them.
  ProxyGroup& proxy() { return net; }
  std::string link(int w) const { return procs[w].args.proc; }

  // --- history --------------------------------------------------------
  // `at`: when the fault began (mono_ns), if before this call: a fault whose
  // proof is read after applying it must be dated from before it applied.
  void fault_start(const std::string& kind, const std::string& target, const std::string& proof, std::int64_t at = 0);
  void fault_end(const std::string& kind, const std::string& target, const std::string& detail);
  void fault_instant(const std::string& kind, const std::string& target, const std::string& proof, std::int64_t at = 0);

  // Set up by the run.
  std::int64_t end_t = 0;
  std::int64_t ttl = 1000;
  std::mt19937_64 rng;
  std::vector<WorkerProc> procs;
  std::vector<LockNode> nodes;
  ProxyGroup net;
  std::unique_ptr<ServerProc> replica;  // failover scenario only
  std::unique_ptr<PgProc> pg;
  // Server 0's links to the other ZooKeeper servers, or what the other etcd
  // members hear of member 0 (Scenario::peer_proxies), declared before `zk`
  // and `etcd`, which use them.
  std::map<int, std::unique_ptr<Proxy>> peer_proxies;  // by upstream port
  ProxyGroup peer_net;
  std::unique_ptr<dlock::tools::ZooKeeperEnsemble> zk;
  std::unique_ptr<dlock::tools::EtcdCluster> etcd;
  // Cluster and Sentinel strategies (topology.hpp): node i announces its
  // proxy's "announce" link, announced[i]; the administration; the
  // sentinels, reached directly.
  std::vector<std::uint16_t> announced;
  std::unique_ptr<dlock::tools::ClusterAdmin> cluster;
  std::unique_ptr<dlock::tools::SentinelAdmin> sentinel;
  std::vector<std::unique_ptr<ServerProc>> sentinels;
  std::unique_ptr<SlotTable> slots;
  std::unique_ptr<HistoryWriter> log;
  std::string self_exe;
  std::string clock_shim;
  int self_pauses = 0;
  // Worker w's command prefix at each spawn (Scenario::wrap); null: none.
  std::function<std::vector<std::string>(RunCtx&, int)> wrap_worker;

  void spawn(int w);
  void housekeeping();
  void stop_workers();

 private:
  void log_fault(const std::string& phase, const std::string& kind, const std::string& target,
                 const std::string& detail, std::int64_t at = 0);
};

// State of a process from /proc/<pid>/stat ('R', 'S', 'T'...), '?' if gone.
char proc_state(int pid);

}  // namespace torture

#endif  // DLOCK_TORTURE_RUN_CTX_HPP_

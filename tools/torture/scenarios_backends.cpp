// Faults of the backends beyond a single Redis server: PostgreSQL restarted
// or its backends terminated, a ZooKeeper leader or the whole ensemble
// killed, and Redlock's nodes restarted or cut off in a minority.
#include "run_ctx.hpp"
#include "scenarios_common.hpp"

namespace torture {
namespace {

using ms = std::chrono::milliseconds;

// ---- PostgreSQL ----------------------------------------------------------------

// Rows of dlock's table, as proof of what a restart kept.
std::string lock_rows(PgProc& pg) { return query_or_error(pg, "SELECT count(*) FROM dlock_locks"); }

// Restarts the PostgreSQL server while a lock is held: "fast" (clients are
// disconnected, committed rows kept) or "immediate" (no shutdown at all;
// crash recovery replays the WAL on start).
void pg_restart(RunCtx& c, const std::string& mode) {
  c.idle(ms(500));
  while (c.running()) {
    const int w = c.find_worker(Phase::holding, ms(1000));
    PgProc& pg = *c.postgres();
    const int old_pid = pg.postmaster_pid();
    const std::string rows_before = lock_rows(pg);
    const std::int64_t at = mono_ns();
    pg.restart(mode);
    c.fault_start("pg-restart", "server",
                  "pg_ctl restart -m " + mode + " of postmaster pid " + std::to_string(old_pid) + " while " +
                      holder_or_nobody(c, w) + " held the lock; " + rows_before + " rows in dlock_locks before",
                  at);
    c.fault_end("pg-restart", "server",
                "postmaster pid " + std::to_string(pg.postmaster_pid()) + ", " + lock_rows(pg) + " rows after " +
                    std::to_string((mono_ns() - at) / 1'000'000) + " ms");
    c.idle(ms(c.uniform(1500, 2500)));
  }
}

// pg_terminate_backend of every connection of the holder (found by its
// application_name), as an administrator or a pooler's idle reaper would.
void pg_terminate(RunCtx& c) {
  c.idle(ms(500));
  while (c.running()) {
    const int w = c.find_worker(Phase::holding, ms(1000));
    if (w >= 0) {
      const std::string n = query_or_error(*c.postgres(),
                                           "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                           "WHERE application_name = '" +
                                               c.name(w) + "'");
      c.fault_instant("pg-terminate", c.name(w),
                      "pg_terminate_backend of the " + n + " connections of " + c.name(w) + " (application_name)");
    }
    c.idle(ms(c.uniform(500, 1500)));
  }
}

// ---- ZooKeeper ------------------------------------------------------------------

// SIGKILLs the ensemble's leader while a lock is held and starts it again
// after a second: the others elect a new leader, sessions move over.
void zk_leader_kill(RunCtx& c) {
  c.idle(ms(1000));
  while (c.running()) {
    const int w = c.find_worker(Phase::holding, ms(1000));
    auto& zk = *c.zookeeper();
    const int leader = zk.leader();
    if (leader >= 0) {
      const int pid = zk.pid(leader);
      const std::int64_t at = mono_ns();
      zk.kill(leader);
      c.fault_start(
          "leader-kill", "server" + std::to_string(leader),
          "SIGKILL ZooKeeper leader pid " + std::to_string(pid) + " while " + holder_or_nobody(c, w) + " held the lock",
          at);
      c.idle(ms(1000));
      zk.start(leader);
      int next = -1;
      for (int i = 0; i < 50 && next < 0; ++i) {
        next = zk.leader();
        if (next < 0) c.idle(ms(100));
      }
      c.fault_end("leader-kill", "server" + std::to_string(leader),
                  "restarted; leader now server " + std::to_string(next));
    }
    c.idle(ms(c.uniform(2000, 3000)));
  }
}

// Every server SIGKILLed at once and started again: the ensemble is down
// for longer than a session timeout, then recovers its sessions and nodes
// from its logs.
void zk_restart_all(RunCtx& c) {
  c.idle(ms(1000));
  while (c.running()) {
    const int w = c.find_worker(Phase::holding, ms(1000));
    auto& zk = *c.zookeeper();
    const std::int64_t at = mono_ns();
    zk.restart_all();
    c.fault_start("ensemble-restart", "all",
                  "SIGKILL every ZooKeeper server while " + holder_or_nobody(c, w) + " held the lock, started again",
                  at);
    const bool serving = zk.wait_serving(ms(30000));
    c.fault_end("ensemble-restart", "all",
                std::string(serving ? "serving again" : "NOT serving") + " after " +
                    std::to_string((mono_ns() - at) / 1'000'000) + " ms");
    c.idle(ms(c.uniform(3000, 4000)));
  }
}

// ---- Redlock nodes -----------------------------------------------------------

std::string node_range(int from, int to) { return "nodes " + std::to_string(from) + "-" + std::to_string(to); }

// Plan scenario 6, the Redis docs' crash-restart case. The last nodes are
// taken from every client (their proxies refuse and reset), so a grant rests
// on a bare majority; one node of that majority is SIGKILLed and comes back
// without persistence, at once or after staying down longer than a lease;
// then the others return. At once, the holder's majority is gone while it
// still believes it holds; after a lease, its keys expired everywhere first.
void node_restart(RunCtx& c, bool delayed) {
  const int n = c.node_count();
  const int victim = n / 2;  // the last node of the bare majority 0..n/2
  c.idle(ms(500));
  while (c.running()) {
    for (int i = victim + 1; i < n; ++i) {
      c.node(i).proxy->refuse("", true);
      c.node(i).proxy->reset("");
    }
    const auto cut = mono_ns();
    const std::string cut_nodes = node_range(victim + 1, n - 1);
    c.fault_start("minority-cut", cut_nodes, "proxies of " + cut_nodes + " refuse and reset every client");
    const int w = c.holder_granted_after(cut);
    if (w >= 0)
      restart_node(c, victim, ms(delayed ? c.ttl_ms() + 500 : 0),
                   " while " + c.name(w) + " held a grant made after the cut");
    for (int i = victim + 1; i < n; ++i) c.node(i).proxy->refuse("", false);
    c.fault_end("minority-cut", cut_nodes, "reachable again");
    c.idle(ms(c.uniform(1500, 2500)));
  }
}

// Two nodes cut off from every client for two leases (blackhole: what was
// sent meanwhile arrives on healing). A majority still answers.
void minority_partition(RunCtx& c) {
  const int n = c.node_count();
  c.idle(ms(300));
  while (c.running()) {
    const int a = static_cast<int>(c.uniform(0, n - 1));
    const int b = static_cast<int>((a + c.uniform(1, n - 1)) % n);
    const std::string target = node_label(c, a) + "," + node_label(c, b);
    ProxyGroup cut;
    cut.add(c.node(a).proxy.get());
    cut.add(c.node(b).proxy.get());
    const auto before = cut.stats("").held_chunks;
    cut.blackhole("", true);
    c.fault_start("partition-minority", target, "proxies blackhole every client <-> " + target);
    c.idle(ms(2 * c.ttl_ms()));
    const auto during = cut.stats("").held_chunks;
    cut.blackhole("", false);
    c.fault_end("partition-minority", target,
                "healed; " + std::to_string(during - before) + " chunks were held during the partition");
    c.idle(ms(c.uniform(500, 1500)));
  }
}

}  // namespace

void add_postgres_scenarios(std::vector<Scenario>& v) {
  add(
      v, "pg-restart-fast", "PostgreSQL restarted (fast shutdown) while a lock is held",
      [](RunCtx& c) { pg_restart(c, "fast"); }, safe(1), kPostgres);
  add(
      v, "pg-restart-immediate",
      "PostgreSQL stopped with no shutdown (immediate) and restarted while a lock "
      "is held: crash recovery",
      [](RunCtx& c) { pg_restart(c, "immediate"); }, safe(1), kPostgres);
  add(v, "pg-terminate", "pg_terminate_backend of every connection of the holder", pg_terminate, safe(1), kPostgres);
}

void add_zookeeper_scenarios(std::vector<Scenario>& v) {
  // Holders that hold across the fault.
  add(v, "zk-leader-kill", "ZooKeeper: SIGKILL the leader while a lock is held, restart it a second later",
      zk_leader_kill, safe(1), kZooKeeper)
      .think_ms = 1500;
  add(v, "zk-restart-all", "ZooKeeper: every server SIGKILLed while a lock is held and restarted", zk_restart_all,
      safe(1), kZooKeeper)
      .think_ms = 1500;
}

void add_redlock_node_scenarios(std::vector<Scenario>& v) {
  // Holders that hold while the node restarts.
  add(
      v, "node-restart",
      "Redlock: 2 of 5 nodes cut off; a node of the holder's bare majority SIGKILLed and "
      "restarted at once without persistence",
      [](RunCtx& c) { node_restart(c, false); },
      overlap_ok("a Redlock node that restarts empty at once forgets its share of a held lock "
                 "(documented: restart after the longest lease, or use appendfsync always)"),
      kRedlock)
      .think_ms = 1000;
  add(
      v, "node-restart-delayed", "Redlock: as node-restart, but the node stays down for a lease first",
      [](RunCtx& c) { node_restart(c, true); }, safe(1), kRedlock)
      .think_ms = 1000;
  add(v, "partition-minority", "Redlock: 2 of 5 nodes cut off from every client for 2 leases", minority_partition,
      safe(1), kRedlock);
}

}  // namespace torture

#include "scenarios.hpp"

#include <thread>

#include "run_ctx.hpp"
#include "strategies.hpp"

namespace torture {
namespace {

using ms = std::chrono::milliseconds;

Expectation safe(std::int64_t min_faults) {
  Expectation e;
  e.min_faults = min_faults;
  e.assumption = "no overlap: the fault stays within what a lease tolerates";
  return e;
}

}  // namespace

Expectation safe_because(std::string why) {
  Expectation e;
  e.min_faults = 1;
  e.assumption = std::move(why);
  return e;
}

namespace {

Expectation overlap_ok(const std::string& why, bool fence_anomaly = false) {
  Expectation e;
  e.overlap_allowed = true;
  e.lost_updates_allowed = true;
  e.fence_anomaly_allowed = fence_anomaly;
  e.min_faults = 1;
  e.assumption = why;
  return e;
}

std::string server_time(SyncRedis& c) {
  auto r = c.cmd({"TIME"});
  if (!r.good() || r.elements.size() != 2) return "?";
  return std::to_string(std::stoll(r.elements[0].str) * 1000 + std::stoll(r.elements[1].str) / 1000);
}

// "server" for a single lock server; "node<i>" in a Redlock set.
std::string node_label(RunCtx& c, int i) { return c.node_count() == 1 ? "server" : "node" + std::to_string(i); }

// SIGKILLs lock node i and starts it again after `down` (0: at once), with
// whatever its persistence kept; logs the restart with its proof (pids,
// DBSIZE before and after). `context` ends the first line of proof.
void restart_node(RunCtx& c, int i, ms down, const std::string& context) {
  LockNode& n = c.node(i);
  const int old_pid = n.server->pid();
  const auto keys_before = n.admin->cmd({"DBSIZE"});
  n.server->kill9();
  const auto down_from = mono_ns();
  c.fault_start("restart", node_label(c, i),
                "SIGKILL redis-server pid " + std::to_string(old_pid) + " of " + node_label(c, i) + " holding " +
                    std::to_string(keys_before.integer) + " keys (aof " +
                    (n.server->spec().aof_always ? "always" : "off") + ")" + context);
  if (down.count() > 0) c.idle(down);
  n.server->start();
  n.admin->disconnect();
  const auto keys_after = n.admin->cmd({"DBSIZE"});
  c.fault_end("restart", node_label(c, i),
              "restarted as pid " + std::to_string(n.server->pid()) + " with " + std::to_string(keys_after.integer) +
                  " keys after " + std::to_string((mono_ns() - down_from) / 1'000'000) + " ms down");
}

// ---- nemeses ---------------------------------------------------------------

void no_faults(RunCtx& c) {
  while (c.running()) c.idle(ms(20));
}

// Kleppmann's case: the holder stops for longer than its lease.
void pause_holder(RunCtx& c) {
  c.idle(ms(500));
  while (c.running()) {
    const int w = c.find_worker(Phase::holding, ms(1000));
    if (w >= 0) c.pause(w, ms(c.uniform(c.ttl_ms() * 3 / 2, c.ttl_ms() * 3)), "pause");
    c.idle(ms(c.uniform(500, 1500)));
  }
}

// Replies to an acquirer are held back past the lease: the same as the
// client stopping right after it sent its request.
void late_reply(RunCtx& c) {
  c.idle(ms(300));
  while (c.running()) {
    const int w = c.find_worker(Phase::acquiring, ms(1000));
    if (w >= 0) {
      const auto before = c.proxy().stats(c.link(w));
      const auto hold = ms(c.ttl_ms() * 3 / 2);
      c.proxy().hold_replies(c.link(w), hold);
      c.fault_start("late-reply", c.name(w),
                    "replies to " + c.name(w) + " held " + std::to_string(hold.count()) + " ms from now for 300 ms");
      c.idle(ms(300));
      c.proxy().hold_replies(c.link(w), ms(0));
      c.idle(hold);
      const auto after = c.proxy().stats(c.link(w));
      c.fault_end("late-reply", c.name(w),
                  std::to_string(after.held_chunks - before.held_chunks) + " reply chunks held back");
    }
    c.idle(ms(c.uniform(300, 800)));
  }
}

// One client's wall clock jumps +-60 s and back.
void client_clock(RunCtx& c) {
  c.idle(ms(300));
  bool forward = true;
  while (c.running()) {
    const int w = static_cast<int>(c.uniform(0, c.workers() - 1));
    const ms offset(forward ? 60000 : -60000);
    c.worker_clock(w).set_offset(offset);
    c.fault_start("client-clock", c.name(w),
                  "CLOCK_REALTIME of " + c.name(w) + " shifted " + std::to_string(offset.count()) +
                      " ms (shim file reads " + std::to_string(c.worker_clock(w).offset().count()) +
                      "); the worker logs the jump it sees");
    c.idle(ms(2000));
    c.worker_clock(w).set_offset(ms(0));
    c.fault_end("client-clock", c.name(w), "offset back to 0");
    forward = !forward;
    c.idle(ms(500));
  }
}

// The lock server's wall clock jumps forward by two leases: keys expire at
// once (Redis expires by the wall clock).
void server_clock(RunCtx& c) {
  c.idle(ms(500));
  while (c.running()) {
    c.find_worker(Phase::holding, ms(1000));
    const auto before = server_time(c.admin());
    const auto jump = ms(2 * c.ttl_ms());
    // Dated from before the write: the server may act on the jump (expire
    // a key, grant it anew) before the proof is read back.
    const std::int64_t at = mono_ns();
    c.server_clock().set_offset(c.server_clock().offset() + jump);
    const auto after = server_time(c.admin());
    const std::string proof = "server TIME " + before + " -> " + after + " ms (+" + std::to_string(jump.count()) +
                              " ms written to the shim file)";
    c.fault_start("server-clock", node_label(c, 0), proof, at);
    c.fault_end("server-clock", node_label(c, 0), proof);
    c.idle(ms(c.uniform(1500, 2500)));
  }
}

void kill_holder(RunCtx& c) {
  c.idle(ms(500));
  while (c.running()) {
    const int w = c.find_worker(Phase::holding, ms(1000));
    if (w >= 0) c.kill(w);
    c.idle(ms(c.uniform(c.ttl_ms() + 500, c.ttl_ms() + 1500)));
  }
}

// SIGKILL the lock server while a lock is held, restart it at once.
void restart_server(RunCtx& c) {
  c.idle(ms(500));
  while (c.running()) {
    c.find_worker(Phase::holding, ms(1000));
    restart_node(c, 0, ms(0), "");
    c.idle(ms(c.uniform(2000, 3000)));
  }
}

// The holder is cut off from the lock server for two leases, then healed;
// what it sent meanwhile arrives late, like TCP after a partition.
void partition_holder(RunCtx& c) {
  c.idle(ms(500));
  while (c.running()) {
    const int w = c.find_worker(Phase::holding, ms(1000));
    if (w >= 0) {
      const auto before = c.proxy().stats(c.link(w));
      c.proxy().blackhole(c.link(w), true);
      c.fault_start("partition", c.name(w), "proxy blackholes " + c.name(w) + " <-> lock server");
      c.idle(ms(2 * c.ttl_ms()));
      const auto during = c.proxy().stats(c.link(w));
      c.proxy().blackhole(c.link(w), false);
      c.fault_end("partition", c.name(w),
                  "healed; " + std::to_string(during.held_chunks - before.held_chunks) +
                      " chunks were held during the partition");
    }
    c.idle(ms(c.uniform(500, 1500)));
  }
}

void net_delay(RunCtx& c) {
  c.idle(ms(300));
  while (c.running()) {
    const ms d(c.uniform(20, c.ttl_ms() / 10));
    const auto before = c.proxy().stats("");
    c.proxy().set_delay("", d);
    c.fault_start("delay", "all", "proxy delays every link " + std::to_string(d.count()) + " ms each way");
    c.idle(ms(2000));
    c.proxy().set_delay("", ms(0));
    const auto after = c.proxy().stats("");
    c.fault_end("delay", "all",
                std::to_string(after.delayed_chunks - before.delayed_chunks) + " chunks delayed, max " +
                    std::to_string(after.max_delay_applied_ms) + " ms");
    c.idle(ms(1000));
  }
}

// Replies lost: requests reach the server, the replies are dropped and the
// connection reset (outcome unknown to the client).
void net_drop(RunCtx& c) {
  c.idle(ms(300));
  while (c.running()) {
    int w = c.find_worker(c.uniform(0, 1) ? Phase::acquiring : Phase::releasing, ms(500));
    if (w < 0) w = static_cast<int>(c.uniform(0, c.workers() - 1));
    const auto before = c.proxy().stats(c.link(w));
    c.proxy().drop_replies(c.link(w), true);
    c.fault_start("drop", c.name(w), "proxy drops replies to " + c.name(w) + " for 200 ms");
    c.idle(ms(200));
    c.proxy().drop_replies(c.link(w), false);
    const auto after = c.proxy().stats(c.link(w));
    c.fault_end("drop", c.name(w),
                std::to_string(after.bytes_dropped - before.bytes_dropped) + " B dropped, " +
                    std::to_string(after.resets - before.resets) + " resets");
    c.idle(ms(c.uniform(300, 700)));
  }
}

void net_reset(RunCtx& c) {
  c.idle(ms(300));
  while (c.running()) {
    const auto before = c.proxy().stats("");
    c.proxy().reset("");
    const auto after = c.proxy().stats("");
    c.fault_instant("reset", "all",
                    "proxy reset every connection: " + std::to_string(after.resets - before.resets) + " resets");
    c.idle(ms(c.uniform(400, 900)));
  }
}

// The lock server stops serving for 1.5 leases: CLIENT PAUSE WRITE and
// DEBUG SLEEP in turn. The nemesis keeps house on its own thread meanwhile.
void server_stall(RunCtx& c) {
  c.idle(ms(500));
  bool debug_sleep = false;
  while (c.running()) {
    c.find_worker(Phase::holding, ms(1000));
    const auto d = c.ttl_ms() * 3 / 2;
    std::int64_t took_ms = -1;
    std::string reply;
    std::thread t([&] {
      SyncRedis conn("127.0.0.1", c.lock_server().port(), ms(10 * d));
      const auto t0 = mono_ns();
      if (debug_sleep) {
        reply = conn.cmd({"DEBUG", "SLEEP", std::to_string(static_cast<double>(d) / 1000.0)}).str;
      } else {
        reply = conn.cmd({"CLIENT", "PAUSE", std::to_string(d), "WRITE"}).str;
        reply += ", then SET waited";
        conn.cmd({"SET", "torture:probe", "1"});
      }
      took_ms = (mono_ns() - t0) / 1'000'000;
    });
    const std::string kind = debug_sleep ? "debug-sleep" : "client-pause";
    c.fault_start(kind, node_label(c, 0),
                  (debug_sleep ? "DEBUG SLEEP " : "CLIENT PAUSE WRITE ") + std::to_string(d) + " ms");
    c.idle(ms(d));
    t.join();
    c.fault_end(kind, node_label(c, 0), reply + " " + std::to_string(took_ms) + " ms");
    debug_sleep = !debug_sleep;
    c.idle(ms(c.uniform(1000, 2000)));
  }
}

// Async-replica failover (plan scenario 7): the master's replication stream
// is cut, a grant lands on the master only, the master dies and its replica
// is promoted; clients follow the proxy to the new master. Once per run.
void failover(RunCtx& c) {
  c.idle(ms(1000));
  c.proxy().blackhole("replication", true);
  const auto cut = mono_ns();
  c.fault_start("replication-cut", "server", "proxy blackholes master -> replica");
  // A grant made after the cut exists on the master only.
  const int w = c.holder_granted_after(cut);
  if (w < 0) return;
  auto on_master = c.admin().cmd({"EXISTS", "dlock:{torture}", "torture"});
  const int old_pid = c.lock_server().pid();
  const std::int64_t killed = mono_ns();  // the fault dates from here, not from its proof
  c.lock_server().kill9();
  SyncRedis replica("127.0.0.1", c.replica->port(), ms(2000));
  auto promoted = replica.cmd({"REPLICAOF", "NO", "ONE"});
  auto on_replica = replica.cmd({"EXISTS", "dlock:{torture}", "torture"});
  c.node(0).proxy->set_upstream_port(c.replica->port());
  c.proxy().reset("");
  c.fault_start("failover", "server",
                "master pid " + std::to_string(old_pid) + " SIGKILLed while " + c.name(w) +
                    " held a grant made after the cut (lock key on master: " + std::to_string(on_master.integer) +
                    "); replica promoted (" + promoted.str +
                    "), lock key on it: " + std::to_string(on_replica.integer) + "; clients moved to it",
                killed);
  c.fault_end("failover", "server", "done");
  c.fault_end("replication-cut", "server", "master gone");
  while (c.running()) c.idle(ms(20));
}

// ---- PostgreSQL ----------------------------------------------------------------

// Rows of dlock's table, as proof of what a restart kept.
std::string lock_rows(PgProc& pg) {
  try {
    return pg.query("SELECT count(*) FROM dlock_locks");
  } catch (const std::exception& e) {
    return std::string("? (") + e.what() + ")";
  }
}

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
                      (w >= 0 ? c.name(w) : std::string("nobody")) + " held the lock; " + rows_before +
                      " rows in dlock_locks before",
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
      std::string n;
      try {
        n = c.postgres()->query(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = '" +
            c.name(w) + "'");
      } catch (const std::exception& e) {
        n = std::string("? (") + e.what() + ")";
      }
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
      c.fault_start("leader-kill", "server" + std::to_string(leader),
                    "SIGKILL ZooKeeper leader pid " + std::to_string(pid) + " while " +
                        (w >= 0 ? c.name(w) : std::string("nobody")) + " held the lock",
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
                  "SIGKILL every ZooKeeper server while " + (w >= 0 ? c.name(w) : std::string("nobody")) +
                      " held the lock, started again",
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

// The lock server gone from the network for two leases (Redlock: one node,
// a minority): open connections hang and new ones hang in SYN, so a
// client's reconnect waits for its own connect timeout. Calls must still
// end by their deadlines, and Redlock's majority keeps granting.
void net_unreachable(RunCtx& c) {
  c.idle(ms(300));
  while (c.running()) {
    const bool one_of_many = c.node_count() > 1;
    const int n = one_of_many ? static_cast<int>(c.uniform(0, c.node_count() - 1)) : 0;
    ProxyGroup one;
    one.add(c.node(n).proxy.get());
    ProxyGroup& cut = one_of_many ? one : c.proxy();
    const std::string target = node_label(c, n);
    cut.unreachable("", true);
    c.fault_start("unreachable", target,
                  "proxy stops answering " + target + ": open connections hang, new ones hang in SYN");
    c.idle(ms(2 * c.ttl_ms()));
    cut.unreachable("", false);
    c.fault_end("unreachable", target, "reachable again");
    c.idle(ms(c.uniform(500, 1500)));
  }
}

std::vector<Scenario> make_scenarios() {
  std::vector<Scenario> v;
  v.push_back({"baseline", "no faults: contention only", "", false, no_faults, {}, safe(0)});
  v.push_back({"pause",
               "SIGSTOP the holder for 1.5-3 leases; some workers stop themselves after the lease check "
               "or between a non-atomic release's check and delete",
               "hold:after-check=pause:0.03,release:mid=pause:0.2",
               false,
               pause_holder,
               {"token-get-then-del", "getset-timestamp"},
               overlap_ok("a holder paused longer than its lease still believes it holds the lock (documented); "
                          "fencing must reject its late writes")});
  {
    // Holds longer than the lease, no fault: the watchdog's job.
    Scenario l{"long-hold", "holders think up to 2 leases inside the critical section, no fault",
               "",          false,
               no_faults,   {"setnx-then-expire", "token-get-then-del", "getset-timestamp", "db-insert-cleanup-job"},
               safe(0)};
    l.think_leases = 2.0;
    l.dlock.min_grants = 3;  // long holds leave fewer grants to judge
    v.push_back(std::move(l));
  }
  v.push_back(
      {"late-reply", "replies to an acquiring client held back for 1.5 leases", "", false, late_reply, {}, safe(1)});
  v.back().setups = kNetworked;
  v.push_back(
      {"client-clock", "one client's wall clock jumps +-60 s", "", false, client_clock, {"getset-timestamp"}, safe(1)});
  v.push_back({"server-clock",
               "the lock server's (Redlock: node 0's) wall clock jumps forward 2 leases",
               "",
               false,
               server_clock,
               {},
               overlap_ok("Redis expires keys by its wall clock: a forward jump frees a held lock (documented)")});
  v.back().redlock = overlap_ok(
      "Redlock assumes the masters' clocks do not jump: a jump on a node of the holder's "
      "bare majority frees its share, and another client can take a majority "
      "(documented; node 0's fences still order the writes)");
  v.back().setups = kRedisFamily;
  v.push_back({"holder-kill",
               "SIGKILL the holder (and self-kills inside a non-atomic acquire)",
               "acquire:mid=kill:0.05",
               false,
               kill_holder,
               {"setnx-del", "setnx-then-expire", "db-insert-unique"},
               safe(1)});
  v.push_back({"restart",
               "SIGKILL the lock server (Redlock: node 0) and restart it at once, no persistence",
               "",
               false,
               restart_server,
               {},
               overlap_ok("a restart without persistence forgets held locks and the fence counter (documented: "
                          "use appendfsync always or restart after the longest lease)",
                          true)});
  v.back().redlock = overlap_ok(
      "a node that restarts empty at once forgets its share of a held lock: a holder "
      "with a bare majority on it loses it (documented); node 0's fence counter restarts",
      true);
  v.back().setups = kRedisFamily;
  v.push_back({"restart-aof",
               "SIGKILL the lock server (Redlock: node 0) and restart it at once, appendfsync always",
               "",
               true,
               restart_server,
               {},
               safe(1)});
  v.back().setups = kRedisFamily;
  {
    Scenario f{"failover",
               "async replica promoted after a grant that never reached it",
               "",
               false,
               failover,
               {},
               overlap_ok("a single master with an asynchronous replica loses grants on failover (documented); "
                          "the promoted replica's fence counter is behind, so fences repeat",
                          true)};
    f.replica = true;
    f.setups = kRedis;
    v.push_back(std::move(f));
  }
  v.push_back({"partition",
               "the holder cut off from the lock server (Redlock: every node) for 2 leases",
               "",
               false,
               partition_holder,
               {},
               safe(1)});
  v.push_back({"net-delay", "every link delayed 20 ms-lease/10 each way", "", false, net_delay, {}, safe(1)});
  v.push_back(
      {"net-drop", "replies lost and connections reset while requests are applied", "", false, net_drop, {}, safe(1)});
  v.push_back({"net-reset", "every connection reset every 0.4-0.9 s", "", false, net_reset, {}, safe(1)});
  for (auto it = v.end() - 4; it != v.end(); ++it) it->setups = kNetworked;
  v.push_back({"net-unreachable",
               "the lock server (Redlock: one node) unreachable for 2 leases: open connections hang, new ones "
               "hang in SYN",
               "",
               false,
               net_unreachable,
               {},
               safe(1)});
  v.back().setups = kRedisFamily;
  v.push_back({"server-stall",
               "CLIENT PAUSE WRITE / DEBUG SLEEP for 1.5 leases (Redlock: on node 0)",
               "",
               false,
               server_stall,
               {},
               safe(1)});
  v.back().setups = kRedisFamily;
  v.push_back({"pg-restart-fast",
               "PostgreSQL restarted (fast shutdown) while a lock is held",
               "",
               false,
               [](RunCtx& c) { pg_restart(c, "fast"); },
               {},
               safe(1)});
  v.back().setups = kPostgres;
  v.push_back({"pg-restart-immediate",
               "PostgreSQL stopped with no shutdown (immediate) and restarted while a lock "
               "is held: crash recovery",
               "",
               false,
               [](RunCtx& c) { pg_restart(c, "immediate"); },
               {},
               safe(1)});
  v.back().setups = kPostgres;
  v.push_back(
      {"pg-terminate", "pg_terminate_backend of every connection of the holder", "", false, pg_terminate, {}, safe(1)});
  v.back().setups = kPostgres;
  v.push_back({"zk-leader-kill",
               "ZooKeeper: SIGKILL the leader while a lock is held, restart it a second later",
               "",
               false,
               zk_leader_kill,
               {},
               safe(1)});
  v.back().setups = kZooKeeper;
  v.back().think_ms = 1500;  // holders that hold across the fault
  v.push_back({"zk-restart-all",
               "ZooKeeper: every server SIGKILLed while a lock is held and restarted",
               "",
               false,
               zk_restart_all,
               {},
               safe(1)});
  v.back().setups = kZooKeeper;
  v.back().think_ms = 1500;
  {
    Scenario r{"node-restart",
               "Redlock: 2 of 5 nodes cut off; a node of the holder's bare majority SIGKILLed and "
               "restarted at once without persistence",
               "",
               false,
               [](RunCtx& c) { node_restart(c, false); },
               {},
               overlap_ok("a Redlock node that restarts empty at once forgets its share of a held lock "
                          "(documented: restart after the longest lease, or use appendfsync always)")};
    r.setups = kRedlock;
    r.think_ms = 1000;  // a holder that holds while the node restarts
    v.push_back(std::move(r));
    Scenario d{"node-restart-delayed",
               "Redlock: as node-restart, but the node stays down for a lease first",
               "",
               false,
               [](RunCtx& c) { node_restart(c, true); },
               {},
               safe(1)};
    d.setups = kRedlock;
    d.think_ms = 1000;
    v.push_back(std::move(d));
    Scenario p{"partition-minority",
               "Redlock: 2 of 5 nodes cut off from every client for 2 leases",
               "",
               false,
               minority_partition,
               {},
               safe(1)};
    p.setups = kRedlock;
    v.push_back(std::move(p));
  }
  add_environment_scenarios(v);
  add_topology_scenarios(v);
  add_server_limit_scenarios(v);
  return v;
}

}  // namespace

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> all = make_scenarios();
  return all;
}

const Scenario* find_scenario(const std::string& name) {
  for (const auto& s : scenarios())
    if (s.name == name) return &s;
  return nullptr;
}

unsigned setup_of(const std::string& strategy) {
  if (strategy == "dlock-run") return kCli;
  switch (lock_server_of(strategy)) {
    case LockServer::postgres:
      return kPostgres;
    case LockServer::sqlite:
      return kSqlite;
    case LockServer::zookeeper:
      return kZooKeeper;
    case LockServer::redis:
      break;
  }
  if (redis_topology_of(strategy) == "cluster") return kCluster;
  if (redis_topology_of(strategy) == "sentinel") return kSentinel;
  return lock_nodes(strategy) > 1 ? kRedlock : kRedis;
}

// Over TLS, all but the async-replica failover: its replica replicates
// through the lock server's proxy, which carries TLS there.
bool applies(const Scenario& s, const std::string& strategy) {
  if (tls_of(strategy) && s.name == "failover") return false;
  return (s.setups & setup_of(strategy)) != 0;
}

Expectation expectation_for(const Scenario& s, const std::string& strategy, bool* judged) {
  *judged = true;
  if (strategy == "redlock" && s.redlock) return *s.redlock;
  if (!is_naive(strategy)) return s.dlock;
  Expectation e;
  e.overlap_allowed = true;
  e.lost_updates_allowed = true;
  e.fence_anomaly_allowed = true;
  e.min_faults = s.dlock.min_faults;
  for (const auto& m : s.must_catch)
    if (m == strategy) {
      e.must_be_caught = true;
      e.assumption = "naive control: must be caught here";
      return e;
    }
  *judged = false;
  e.assumption = "naive control, not judged in this scenario";
  return e;
}

std::vector<PlannedRun> short_suite() {
  std::vector<PlannedRun> v;
  for (const char* st : {"dlock", "redlock", "postgres", "sqlite", "zk", "dlock-run"})
    for (const auto& s : scenarios())
      if (applies(s, st) && !s.full_only) v.push_back({s.name, st});
  // Cluster and Sentinel: their own faults, a holder cut off, lost replies.
  for (const char* st : {"cluster", "sentinel"})
    for (const auto& s : scenarios())
      if (applies(s, st) && !s.full_only &&
          ((s.setups & ~unsigned{kTopologies}) == 0 || s.name == "partition" || s.name == "net-drop"))
        v.push_back({s.name, st});
  // TLS: a holder paused, replies lost mid-stream, connections reset, the
  // server restarted (every new TLS connection, the fast path's too).
  for (const char* s : {"pause", "net-drop", "net-reset", "restart"}) v.push_back({s, "dlock-tls"});
  // Each naive strategy once, where it must fail.
  v.push_back({"holder-kill", "setnx-del"});
  v.push_back({"holder-kill", "setnx-then-expire"});
  v.push_back({"holder-kill", "db-insert-unique"});
  v.push_back({"long-hold", "db-insert-cleanup-job"});
  v.push_back({"client-clock", "getset-timestamp"});
  v.push_back({"pause", "token-get-then-del"});
  // Correct but a herd: shown for its wake-ups per release, not judged.
  v.push_back({"baseline", "zk-herd"});
  // Each recipe on Redis and on SQLite, under a fault on its holders: a
  // kill (a lost hold, a lost permit, a dead waiter's place in the line) or
  // a pause past the lease (a deposed leader writing, a paused reader or
  // permit holder). The full suite runs them on every backend and scenario.
  for (const char* backend : {"redis", "sqlite"}) {
    const bool redis = std::string(backend) == "redis";
    v.push_back({redis ? "holder-kill" : "pause", std::string("fair-") + backend});
    v.push_back({redis ? "pause" : "holder-kill", std::string("rw-") + backend});
    v.push_back({redis ? "holder-kill" : "pause", std::string("semaphore-") + backend});
    v.push_back({redis ? "pause" : "holder-kill", std::string("election-") + backend});
  }
  return v;
}

std::vector<PlannedRun> full_suite() {
  std::vector<PlannedRun> v;
  for (const auto& s : scenarios())
    for (const auto& st : strategy_names())
      if (applies(s, st)) v.push_back({s.name, st});
  return v;
}

}  // namespace torture

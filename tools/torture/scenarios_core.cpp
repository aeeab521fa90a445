// The test plan's first faults, which most set-ups share: holders stopped,
// killed or answered late, clocks that jump, a network that is cut, slow,
// lossy or reset, and a lock server restarted, failed over or stalled.
#include <thread>

#include "run_ctx.hpp"
#include "scenarios_common.hpp"

namespace torture {
namespace {

using ms = std::chrono::milliseconds;

std::string server_time(SyncRedis& c) {
  auto r = c.cmd({"TIME"});
  if (!r.good() || r.elements.size() != 2) return "?";
  return std::to_string(std::stoll(r.elements[0].str) * 1000 + std::stoll(r.elements[1].str) / 1000);
}

// ---- nemeses ---------------------------------------------------------------

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

// A crowd on one name: its holders killed, and its waiters paused for a
// lease now and then (one may be the waiter a release just woke: the next
// must get the lock within the bound). One fault at a time: a killed
// holder's successor must not be a paused waiter (a queue's head blocks
// it for the pause, beyond the recovery bound, by design).
void crowd_faults(RunCtx& c) {
  c.idle(ms(800));
  bool kill = true;
  while (c.running()) {
    const int w = c.find_worker(kill ? Phase::holding : Phase::acquiring, ms(1000));
    if (w >= 0 && kill) c.kill(w);
    if (w >= 0 && !kill) c.pause(w, ms(c.ttl_ms()), "waiter-pause");
    kill = !kill;
    c.idle(ms(c.uniform(c.ttl_ms() + 500, c.ttl_ms() + 1000)));
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
  idle_to_end(c);
}

}  // namespace

void add_holder_and_clock_scenarios(std::vector<Scenario>& v) {
  add(v, "baseline", "no faults: contention only", idle_to_end, safe(0));
  {
    Scenario& s = add(v, "pause",
                      "SIGSTOP the holder for 1.5-3 leases; some workers stop themselves after the lease check "
                      "or between a non-atomic release's check and delete",
                      pause_holder,
                      overlap_ok("a holder paused longer than its lease still believes it holds the lock (documented); "
                                 "fencing must reject its late writes"));
    s.failpoints = "hold:after-check=pause:0.03,release:mid=pause:0.2";
    s.must_catch = {"token-get-then-del", "getset-timestamp"};
  }
  {
    // Holds longer than the lease, no fault: the watchdog's job.
    Scenario& s =
        add(v, "long-hold", "holders think up to 2 leases inside the critical section, no fault", idle_to_end, safe(0));
    s.must_catch = {"setnx-then-expire", "token-get-then-del", "getset-timestamp", "db-insert-cleanup-job"};
    s.think_leases = 2.0;
    s.dlock.min_grants = 3;  // long holds leave fewer grants to judge
  }
  add(v, "late-reply", "replies to an acquiring client held back for 1.5 leases", late_reply, safe(1), kNetworked);
  {
    Scenario& s = add(v, "client-clock", "one client's wall clock jumps +-60 s", client_clock, safe(1));
    s.must_catch = {"getset-timestamp"};
  }
  {
    Scenario& s =
        add(v, "server-clock", "the lock server's (Redlock: node 0's) wall clock jumps forward 2 leases", server_clock,
            overlap_ok("Redis expires keys by its wall clock: a forward jump frees a held lock (documented)"),
            kRedisFamily);
    s.redlock = overlap_ok(
        "Redlock assumes the masters' clocks do not jump: a jump on a node of the holder's "
        "bare majority frees its share, and another client can take a majority "
        "(documented; node 0's fences still order the writes)");
  }
  {
    Scenario& s =
        add(v, "holder-kill", "SIGKILL the holder (and self-kills inside a non-atomic acquire)", kill_holder, safe(1));
    s.failpoints = "acquire:mid=kill:0.05";
    s.must_catch = {"setnx-del", "setnx-then-expire", "db-insert-unique"};
  }
}

void add_crowd_scenario(std::vector<Scenario>& v) {
  Expectation e = safe(1, "a crowd: no overlap, every waiter served within the bound, one wake-up per release");
  constexpr int kCrowd = 16;
  e.max_waited_through = 2 * kCrowd;  // the waiters ahead, and as many again
  e.max_wakeups_per_release = 3;
  Scenario& s = add(v, "crowd",
                    std::to_string(kCrowd) +
                        " workers on one name: holders SIGKILLed and waiters SIGSTOPped for a "
                        "lease in turn",
                    crowd_faults, e);
  s.workers = kCrowd;
  s.wakes_one = {"dlock", "dlock-tls", "postgres", "sqlite", "zk", "etcd"};
}

void add_server_restart_scenarios(std::vector<Scenario>& v) {
  {
    Scenario& s = add(v, "restart", "SIGKILL the lock server (Redlock: node 0) and restart it at once, no persistence",
                      restart_server,
                      overlap_ok("a restart without persistence forgets held locks and the fence counter (documented: "
                                 "use appendfsync always or restart after the longest lease)",
                                 true),
                      kRedisFamily);
    s.redlock = overlap_ok(
        "a node that restarts empty at once forgets its share of a held lock: a holder "
        "with a bare majority on it loses it (documented); node 0's fence counter restarts",
        true);
  }
  add(v, "restart-aof", "SIGKILL the lock server (Redlock: node 0) and restart it at once, appendfsync always",
      restart_server, safe(1), kRedisFamily)
      .aof_always = true;
  add(v, "failover", "async replica promoted after a grant that never reached it", failover,
      overlap_ok("a single master with an asynchronous replica loses grants on failover (documented); "
                 "the promoted replica's fence counter is behind, so fences repeat",
                 true),
      kRedis)
      .replica = true;
}

void add_network_scenarios(std::vector<Scenario>& v) {
  add(v, "partition", "the holder cut off from the lock server (Redlock: every node) for 2 leases", partition_holder,
      safe(1), kNetworked);
  add(v, "net-delay", "every link delayed 20 ms-lease/10 each way", net_delay, safe(1), kNetworked);
  add(v, "net-drop", "replies lost and connections reset while requests are applied", net_drop, safe(1), kNetworked);
  add(v, "net-reset", "every connection reset every 0.4-0.9 s", net_reset, safe(1), kNetworked);
  add(v, "net-unreachable",
      "the lock server (Redlock: one node) unreachable for 2 leases: open connections hang, new ones "
      "hang in SYN",
      net_unreachable, safe(1), kRedisFamily);
  // To its clients, a stalled server is as silent as a cut-off one.
  add(v, "server-stall", "CLIENT PAUSE WRITE / DEBUG SLEEP for 1.5 leases (Redlock: on node 0)", server_stall, safe(1),
      kRedisFamily);
}

}  // namespace torture

// Faults that only a Redis Cluster or a Sentinel set-up has: a master that
// dies before its replica got the last grant and is replaced by it, the
// lock's slot migrated between masters while it is held and awaited, and the
// lock's master cut off from every client while the cluster (or the
// sentinels) still see it. Each states its expectation before it runs.
#include <stdexcept>

#include "run_ctx.hpp"
#include "scenarios_common.hpp"
#include "topology.hpp"

namespace torture {
namespace {

using ms = std::chrono::milliseconds;

std::string label(int i) { return "node" + std::to_string(i); }

// The master is cut from its replica (and, with Sentinel, from the
// sentinels) by blackholing its announced address; a grant lands after the
// cut; the master is SIGKILLed and its replica promoted: by CLUSTER FAILOVER
// TAKEOVER, or by the sentinels (SENTINEL FAILOVER). The clients follow.
void failover_after_cut(RunCtx& c) {
  c.idle(ms(1000));
  const int m = lock_master(c);
  const int r = m < 0 ? -1 : replica_of(c, m);
  if (m < 0 || r < 0) {
    c.fault_instant("no-failover", "lock master", "no master (" + std::to_string(m) + ") or replica of it found");
    idle_to_end(c);
    return;
  }
  c.node(m).proxy->blackhole("announce", true);
  const auto cut = mono_ns();
  c.fault_start("replication-cut", label(m),
                "proxy blackholes " + label(m) + "'s announced address: its replica " + label(r) +
                    (c.sentinel ? " and the sentinels" : "") + " no longer reach it");
  const int w = c.holder_granted_after(cut);
  if (w < 0) return;
  // The lost grant's fence, and the replica's counter, which lacks it.
  const std::string counter = std::string(kTortureLockKey) + ":f";
  const auto lost_fence = c.node(m).admin->cmd({"HGET", kTortureLockKey, "f"});
  c.node(r).admin->cmd({"READONLY"});  // a cluster replica answers reads, not MOVED
  const auto replica_counter = c.node(r).admin->cmd({"GET", counter});
  const auto on_master = c.node(m).admin->cmd({"EXISTS", kTortureLockKey});
  const auto on_replica_before = c.node(r).admin->cmd({"EXISTS", kTortureLockKey});
  const int old_pid = c.node(m).server->pid();
  const std::int64_t killed = mono_ns();  // the fault dates from here, not from its proof
  c.node(m).server->kill9();
  std::string how;
  try {
    if (c.cluster) {
      c.cluster->failover(r, "TAKEOVER");
      how = "CLUSTER FAILOVER TAKEOVER on " + label(r);
    } else {
      c.sentinel->failover();
      how = "SENTINEL FAILOVER: the sentinels name " + label(r);
    }
  } catch (const std::exception& e) {
    how = std::string("the promotion did not finish: ") + e.what();
  }
  // A promoted replica drops its clients (Sentinel asks it to): asked again.
  auto on_replica = c.node(r).admin->cmd({"EXISTS", kTortureLockKey});
  if (on_replica.status != Reply::Status::ok) on_replica = c.node(r).admin->cmd({"EXISTS", kTortureLockKey});
  c.fault_start("failover", label(m),
                "master pid " + std::to_string(old_pid) + " SIGKILLed while " + c.name(w) +
                    " held a grant made after the cut (lock key on the master: " + on_master.text() +
                    ", on its replica: " + on_replica_before.text() + "; the grant's fence " + lost_fence.text() +
                    ", the replica's fence counter " + replica_counter.text() + "); " + how +
                    "; lock key on it after: " + on_replica.text(),
                killed);
  c.fault_end("failover", label(m), "done");
  c.fault_end("replication-cut", label(m), "master gone");
  idle_to_end(c);
}

// The lock's slot moves to another master while a holder holds and others
// wait: first the keys (the slot MIGRATING on the source, IMPORTING on the
// target: the source answers ASK for what it no longer has, TRYAGAIN for a
// script whose keys are split), then the ownership.
void migrate_lock_slot(RunCtx& c) {
  c.idle(ms(500));
  auto& admin = *c.cluster;
  const int slot = admin.slot_of(kTortureLockKey);
  const std::string s = std::to_string(slot);
  while (c.running()) {
    const int holder = c.find_worker(Phase::holding, ms(500));
    const int from = admin.master_of_slot(slot);
    std::vector<int> targets;
    for (int i = 0; i < c.node_count(); ++i)
      if (i != from && c.node(i).server->pid() > 0 && admin.is_master(i)) targets.push_back(i);
    if (from < 0 || targets.empty()) {
      c.idle(ms(100));
      continue;
    }
    const int to = targets[static_cast<std::size_t>(c.uniform(0, static_cast<std::int64_t>(targets.size()) - 1))];
    int waiting = 0;
    for (int w = 0; w < c.workers(); ++w)
      if (c.slots->at(w).phase.load() == static_cast<std::int32_t>(Phase::acquiring)) ++waiting;
    const std::string target = "slot " + s + " " + label(from) + "->" + label(to);
    const auto keys = c.node(from).admin->cmd({"CLUSTER", "COUNTKEYSINSLOT", s});
    c.fault_start("slot-migration", target,
                  keys.text() + " keys of the lock's slot on " + label(from) + "; " +
                      (holder >= 0 ? c.name(holder) + " holding" : std::string("no holder seen")) + ", " +
                      std::to_string(waiting) + " waiting");
    std::string outcome;
    try {
      admin.migrate_slot(slot, to, 2);  // the keys moved; the slot still MIGRATING
      c.idle(ms(c.uniform(50, 300)));
      admin.migrate_slot(slot, to, 0);
      outcome = "owned by " + label(to) + " (" + std::to_string(admin.master_of_slot(slot)) + "), " +
                c.node(to).admin->cmd({"CLUSTER", "COUNTKEYSINSLOT", s}).text() + " keys there";
    } catch (const std::exception& e) {
      outcome = std::string("migration failed: ") + e.what();
    }
    c.fault_end("slot-migration", target, outcome);
    c.idle(ms(c.uniform(300, 800)));
  }
}

// The lock's master cut off from every client for two leases (blackhole:
// what was sent meanwhile arrives on healing); its replica and the
// sentinels still see it, so nothing fails over.
void partition_master(RunCtx& c) {
  c.idle(ms(300));
  while (c.running()) {
    const int m = lock_master(c);
    if (m < 0) {
      c.idle(ms(100));
      continue;
    }
    Proxy& p = *c.node(m).proxy;
    const auto before = p.stats("").held_chunks;
    for (int w = 0; w < c.workers(); ++w) p.blackhole(c.link(w), true);
    c.fault_start("partition-master", label(m),
                  "proxy blackholes every client <-> " + label(m) + ", the lock's master; its replica" +
                      (c.sentinel ? " and the sentinels" : "") + " still reach it");
    c.idle(ms(2 * c.ttl_ms()));
    const auto during = p.stats("").held_chunks;
    for (int w = 0; w < c.workers(); ++w) p.blackhole(c.link(w), false);
    c.fault_end("partition-master", label(m),
                "healed; " + std::to_string(during - before) + " chunks were held during the partition");
    c.idle(ms(c.uniform(500, 1500)));
  }
}

Expectation failover_expectation() {
  Expectation e;
  e.overlap_allowed = true;
  e.lost_updates_allowed = true;
  e.fence_anomaly_allowed = false;
  e.min_faults = 1;
  e.assumption =
      "an asynchronous replica promoted after its link was cut lacks the last grant: a second holder may be "
      "granted (documented); fences stay strictly increasing per name (the counter is raised to the server's "
      "clock), so the fenced register refuses the first holder's late writes";
  return e;
}

}  // namespace

void add_topology_scenarios(std::vector<Scenario>& v) {
  // Holders that hold across the promotion.
  add(v, "cluster-failover",
      "Redis Cluster: the lock's master cut from its replica, SIGKILLed after a grant, the replica promoted "
      "(CLUSTER FAILOVER TAKEOVER)",
      failover_after_cut, failover_expectation(), kCluster)
      .think_ms = 1500;
  add(v, "sentinel-failover",
      "Sentinel: the master cut from its replica and the sentinels, SIGKILLed after a grant, the replica promoted "
      "(SENTINEL FAILOVER)",
      failover_after_cut, failover_expectation(), kSentinel)
      .think_ms = 1500;
  // Holders that hold while their slot moves.
  add(v, "cluster-migrate",
      "Redis Cluster: the lock's slot migrated between masters again and again while held and awaited "
      "(ASK, TRYAGAIN, MOVED)",
      migrate_lock_slot,
      safe(1,
           "no overlap and no missed wake-up: the lock's keys share one slot and move together; a command caught "
           "mid-move is redirected or retried within its time"),
      kCluster)
      .think_ms = 1000;
  add(v, "partition-master",
      "Cluster, Sentinel: the lock's master cut off from every client for 2 leases, still seen by its replica (and "
      "the sentinels)",
      partition_master,
      safe(1,
           "no overlap: the holder cannot renew and stops trusting its grant when its lease runs out, before the "
           "master lets it go"),
      kTopologies);
}

}  // namespace torture

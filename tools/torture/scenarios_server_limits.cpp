// Faults in a Redis server's rights and limits, on every Redis set-up (one
// server, Redlock, Cluster, Sentinel), aimed at the lock's master: the
// workers' ACL user loses its rights (NOPERM on the connections it has) or is
// switched off with its connections killed (every reconnect refused at AUTH);
// the server's client limit is lowered under its connections and the
// workers' links are reset (every reconnect refused). The default user (the
// nemesis, replication, the sentinels) keeps working throughout.
#include <string>
#include <vector>

#include "run_ctx.hpp"
#include "scenarios_common.hpp"
#include "server_proc.hpp"
#include "topology.hpp"

namespace torture {
namespace {

using ms = std::chrono::milliseconds;

// The nodes a fault hits: the lock's master (one server: node 0; Cluster
// and Sentinel: the master that serves the lock now). Redlock: one node in
// even rounds (the quorum holds), a majority in odd ones (it cannot).
std::vector<int> targets(RunCtx& c, int round) {
  if (c.cluster || c.sentinel) {
    const int m = lock_master(c);
    return m < 0 ? std::vector<int>{} : std::vector<int>{m};
  }
  if (c.node_count() == 1) return {0};
  if (round % 2 == 0) return {static_cast<int>(c.uniform(0, c.node_count() - 1))};
  std::vector<int> majority;
  for (int i = 0; i <= c.node_count() / 2; ++i) majority.push_back(i);
  return majority;
}

std::string labels(const std::vector<int>& nodes) {
  std::string out;
  for (int i : nodes) out += (out.empty() ? "node" : ",node") + std::to_string(i);
  return out;
}

// A field of INFO's text ("rejected_connections"), -1 if absent.
long long info_field(RunCtx& c, int node, const std::string& section, const std::string& field) {
  const std::string text = c.node(node).admin->cmd({"INFO", section}).str;
  const auto at = text.find(field + ":");
  if (at == std::string::npos) return -1;
  return std::stoll(text.substr(at + field.size() + 1));
}

// The refusals ACL LOG counts (each entry counts its repeats).
long long acl_refusals(RunCtx& c, int node) {
  long long n = 0;
  for (const auto& entry : c.node(node).admin->cmd({"ACL", "LOG", "128"}).elements)
    for (std::size_t k = 0; k + 1 < entry.elements.size(); k += 2)
      if (entry.elements[k].str == "count") n += entry.elements[k + 1].integer;
  return n;
}

// Rounds alternate: the user's rights taken (-@all: every command of its open
// connections answers NOPERM, renewals included), then the user switched
// off and its connections killed (every reconnect fails AUTH). Two leases
// each, then rights and user restored.
void acl_revoke(RunCtx& c) {
  c.idle(ms(500));
  for (int round = 0; c.running(); ++round) {
    c.find_worker(Phase::holding, ms(1000));
    const std::vector<int> nodes = targets(c, round / 2);
    if (nodes.empty()) {
      c.idle(ms(100));
      continue;
    }
    const bool off = round % 2 == 1;
    std::string proof;
    for (int i : nodes) {
      auto& admin = *c.node(i).admin;
      admin.cmd({"ACL", "LOG", "RESET"});
      if (off) {
        const auto set = admin.cmd({"ACL", "SETUSER", kTortureUser, "off"});
        const auto killed = admin.cmd({"CLIENT", "KILL", "USER", kTortureUser});
        proof += "node" + std::to_string(i) + ": ACL SETUSER off " + set.text() + ", CLIENT KILL USER " +
                 killed.text() + " connections; ";
      } else {
        proof += "node" + std::to_string(i) + ": ACL SETUSER -@all " +
                 admin.cmd({"ACL", "SETUSER", kTortureUser, "-@all"}).text() + "; ";
      }
    }
    const std::string kind = off ? "acl-user-off" : "acl-noperm";
    c.fault_start(kind, labels(nodes), proof + "for 2 leases");
    c.idle(ms(2 * c.ttl_ms()));
    std::string detail;
    for (int i : nodes) {
      auto& admin = *c.node(i).admin;
      const auto restored = admin.cmd({"ACL", "SETUSER", kTortureUser, "on", "+@all"});
      detail += "node" + std::to_string(i) + ": restored " + restored.text() + " after " +
                std::to_string(acl_refusals(c, i)) + " refusals in ACL LOG; ";
    }
    c.fault_end(kind, labels(nodes), detail);
    c.idle(ms(c.uniform(500, 1500)));
  }
}

// maxclients lowered to 1 (the nemesis' own connection stays, as do the
// replica's and the sentinels'), the workers' links reset: every reconnect
// is answered "max number of clients reached" for two leases.
void maxclients(RunCtx& c) {
  c.idle(ms(500));
  for (int round = 0; c.running(); ++round) {
    c.find_worker(Phase::holding, ms(1000));
    const std::vector<int> nodes = targets(c, round);
    if (nodes.empty()) {
      c.idle(ms(100));
      continue;
    }
    std::vector<std::string> was;
    std::vector<long long> rejected;
    for (int i : nodes) {
      auto& admin = *c.node(i).admin;
      const auto got = admin.cmd({"CONFIG", "GET", "maxclients"});
      was.push_back(got.elements.size() == 2 ? got.elements[1].str : "10000");
      rejected.push_back(info_field(c, i, "stats", "rejected_connections"));
      admin.cmd({"CONFIG", "SET", "maxclients", "1"});
      for (int w = 0; w < c.workers(); ++w) c.node(i).proxy->reset(c.link(w));
    }
    c.fault_start("maxclients", labels(nodes),
                  "CONFIG SET maxclients 1 (was " + was.front() + ") and every worker's connection reset");
    c.idle(ms(2 * c.ttl_ms()));
    std::string detail;
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      const int i = nodes[k];
      c.node(i).admin->cmd({"CONFIG", "SET", "maxclients", was[k]});
      detail += "node" + std::to_string(i) + ": " +
                std::to_string(info_field(c, i, "stats", "rejected_connections") - rejected[k]) +
                " connections refused; ";
    }
    c.fault_end("maxclients", labels(nodes), detail + "limit restored");
    c.idle(ms(c.uniform(500, 1500)));
  }
}

// The fence counters deleted under the workers (an operator's DEL, a
// FLUSHDB of the wrong database, an allkeys-* eviction): every key that is a
// counter ("<prefix>fence", a per-name "...:f") on the lock's master (Redlock:
// every node), a few times a lease. The next grant's fence must still be
// larger than every earlier one.
void fence_counter_deleted(RunCtx& c) {
  c.idle(ms(500));
  while (c.running()) {
    c.find_worker(Phase::holding, ms(1000));
    std::vector<int> nodes = targets(c, 0);
    if (!c.cluster && !c.sentinel) {
      nodes.clear();
      for (int i = 0; i < c.node_count(); ++i) nodes.push_back(i);
    }
    std::string detail;
    for (int i : nodes) {
      auto& admin = *c.node(i).admin;
      int deleted = 0;
      for (const auto& key : admin.cmd({"KEYS", "*"}).elements) {
        const std::string& k = key.str;
        if (k.ends_with("fence") || k.ends_with(":f")) deleted += static_cast<int>(admin.cmd({"DEL", k}).integer);
      }
      detail += "node" + std::to_string(i) + ": " + std::to_string(deleted) + " counters deleted; ";
    }
    c.fault_start("fence-counter-deleted", labels(nodes), "DEL of every fence counter: " + detail, mono_ns());
    c.fault_end("fence-counter-deleted", labels(nodes), detail);
    c.idle(ms(c.uniform(c.ttl_ms() / 3, c.ttl_ms())));
  }
}

}  // namespace

void add_server_limit_scenarios(std::vector<Scenario>& v) {
  // Holders that hold while their rights go.
  add(v, "acl-revoke",
      "the workers' ACL user loses every right (NOPERM), or is switched off and its connections killed, "
      "on the lock's master (Redlock: one node or a majority) for 2 leases",
      acl_revoke,
      safe(1,
           "no overlap and no stale write: a refused renewal ends the holder's trust at its lease's end, "
           "when the server lets the key go; a refused acquire or release is an error, never a grant"),
      kRedisFamily | kTopologies)
      .think_ms = 1000;
  add(v, "maxclients",
      "maxclients lowered to 1 under the lock's master's connections and every worker's connection "
      "reset (Redlock: one node or a majority) for 2 leases",
      maxclients,
      safe(1,
           "no overlap: a holder that cannot reconnect cannot renew, and stops trusting its grant when "
           "its lease ends; a refused connection is unavailable, never a grant"),
      kRedisFamily | kTopologies)
      .think_ms = 1000;
  add(v, "fence-counter-deleted",
      "every fence counter deleted on the lock's master (Redlock: every node) a few times a lease, "
      "as an operator's DEL, a FLUSHDB or an allkeys-* eviction would",
      fence_counter_deleted,
      safe(1, "no overlap, and fences still increase: a counter made again starts at the server's clock"),
      kRedisFamily | kTopologies);
}

}  // namespace torture

// The faults of an etcd cluster: its leader killed, a member paused or cut
// off from the others, the follower carrying the clients' watch streams
// paused, an operator deleting the holder's key, the holder's rights
// revoked mid-hold, and compaction under waiting clients.
#include <functional>
#include <sstream>

#include "run_ctx.hpp"
#include "scenarios_common.hpp"

namespace torture {
namespace {

using ms = std::chrono::milliseconds;

std::string member_label(int i) { return "member" + std::to_string(i); }

std::string role_of(int member, int leader) {
  return leader < 0 ? "no leader known" : member == leader ? "the leader" : "a follower";
}

// The cluster's revision now, read from `etcdctl endpoint status`; 0 if no
// member answered.
std::int64_t revision_now(dlock::tools::EtcdCluster& etcd) {
  const auto r = etcd.etcdctl({"--command-timeout=2s", "endpoint", "status", "-w", "fields"});
  std::istringstream in(r.out);
  std::int64_t best = 0;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("\"Revision\" : ", 0) == 0) best = std::max<std::int64_t>(best, std::stoll(line.substr(13)));
  return best;
}

// SIGKILLs the leader while a lock is held and starts it again after a
// second: the others elect a new leader, which extends every lease by an
// election timeout; keep-alives move to the members that answer.
void etcd_leader_kill(RunCtx& c) {
  c.idle(ms(1000));
  while (c.running()) {
    const int w = c.find_worker(Phase::holding, ms(1000));
    auto& etcd = *c.etcd_cluster();
    const int leader = etcd.leader();
    if (leader >= 0) {
      const int pid = etcd.pid(leader);
      const std::int64_t at = mono_ns();
      etcd.kill(leader);
      c.fault_start(
          "leader-kill", member_label(leader),
          "SIGKILL etcd leader pid " + std::to_string(pid) + " while " + holder_or_nobody(c, w) + " held the lock", at);
      c.idle(ms(1000));
      etcd.start(leader);
      const bool led = etcd.wait_leader(ms(10000));
      c.fault_end("leader-kill", member_label(leader),
                  "restarted; leader now " + (led ? member_label(etcd.leader()) : std::string("NONE after 10 s")));
    }
    c.idle(ms(c.uniform(2000, 3000)));
  }
}

// SIGSTOPs member `m` for 1.5-2.5 leases (`detail` tells the fault, given
// the pause and the member's state once stopped), then SIGCONT, a leader
// awaited, and 1-2 s of calm.
void pause_member(RunCtx& c, int m, const std::string& kind, const std::function<std::string(ms, char)>& detail) {
  auto& etcd = *c.etcd_cluster();
  const auto d = ms(c.uniform(c.ttl_ms() * 3 / 2, c.ttl_ms() * 5 / 2));
  const std::int64_t at = mono_ns();
  etcd.pause(m);
  c.fault_start(kind, member_label(m), detail(d, proc_state(etcd.pid(m))), at);
  c.idle(d);
  etcd.resume(m);
  const bool led = etcd.wait_leader(ms(10000));
  c.fault_end(kind, member_label(m), std::string("SIGCONT; ") + (led ? "a leader" : "NO leader after 10 s"));
  c.idle(ms(c.uniform(1000, 2000)));
}

// SIGSTOPs a member, chosen at random (the leader a third of the time),
// for 1.5-2.5 leases while a lock is held: its clients' calls and
// keep-alives time out and move to the others.
void etcd_member_pause(RunCtx& c) {
  c.idle(ms(1000));
  while (c.running()) {
    const int w = c.find_worker(Phase::holding, ms(1000));
    auto& etcd = *c.etcd_cluster();
    const int leader = etcd.leader();
    const int m = static_cast<int>(c.uniform(0, etcd.size() - 1));
    pause_member(c, m, "member-pause", [&](ms d, char state) {
      return "SIGSTOP etcd member pid " + std::to_string(etcd.pid(m)) + " (" + role_of(m, leader) + ") for " +
             std::to_string(d.count()) + " ms while " + holder_or_nobody(c, w) + " held the lock; state " +
             std::string(1, state);
    });
  }
}

// SIGSTOPs the follower serving the most of the clients' watch streams
// (its /metrics gauge) for 1.5-2.5 leases while a lock is held and others
// wait: their wake-ups and the holder's loss notices travel on it. Each
// client's stream is probed and moves to another member.
void etcd_stream_pause(RunCtx& c) {
  c.idle(ms(1000));
  int misses = 0;
  while (c.running()) {
    const int w = c.find_worker(Phase::holding, ms(1000));
    auto& etcd = *c.etcd_cluster();
    const int leader = etcd.leader();
    int m = -1, streams = 0;
    for (int i = 0; i < etcd.size() && leader >= 0; ++i) {
      if (i == leader) continue;
      const int n = etcd.watch_streams(i);
      if (n > streams) streams = n, m = i;
    }
    // No follower carries a stream (all on the leader, or its gauge not
    // read): after a few looks, a follower is paused all the same.
    if (m < 0 && leader >= 0 && ++misses >= 5) m = (leader + 1) % etcd.size();
    if (m < 0) {
      c.idle(ms(200));
      continue;
    }
    misses = 0;
    pause_member(c, m, "stream-pause", [&](ms d, char) {
      return "SIGSTOP etcd follower pid " + std::to_string(etcd.pid(m)) + ", carrying " + std::to_string(streams) +
             " watch stream(s), for " + std::to_string(d.count()) + " ms while " + holder_or_nobody(c, w) +
             " held the lock";
    });
  }
}

// The scenario's logins: even workers are alice, odd ones bob, each with
// role "locker" (read and write under torture/); root may do anything.
const char* const kRoot = "--user=root:root";
std::string login_of(int w) { return w % 2 == 0 ? "alice" : "bob"; }

void etcd_auth_prepare(RunCtx& c) {
  auto& etcd = *c.etcd_cluster();
  const std::vector<std::vector<std::string>> steps = {
      {"user", "add", "root", "--new-user-password=root"},
      {"user", "add", "alice", "--new-user-password=alice"},
      {"user", "add", "bob", "--new-user-password=bob"},
      {"role", "add", "locker"},
      {"role", "grant-permission", "locker", "--prefix=true", "readwrite", "torture/"},
      {"user", "grant-role", "alice", "locker"},
      {"user", "grant-role", "bob", "locker"},
      {"auth", "enable"}};
  for (const auto& step : steps) {
    const auto r = etcd.etcdctl(step);
    if (r.exit_code != 0) throw std::runtime_error("etcdctl " + step[0] + " " + step[1] + ": " + r.err);
  }
}

// Revokes the holder's login's role while it holds (as an operator
// rotating rights), for 1-2 leases: its release is refused, so it lets its
// lease go; the other login's workers go on. Then the role is granted back.
void etcd_auth_revoke(RunCtx& c) {
  c.idle(ms(1000));
  while (c.running()) {
    const int w = c.find_worker(Phase::holding, ms(1000));
    if (w < 0) continue;
    auto& etcd = *c.etcd_cluster();
    const std::string user = login_of(w);
    const std::int64_t at = mono_ns();
    const auto r = etcd.etcdctl({kRoot, "user", "revoke-role", user, "locker"});
    c.fault_start("auth-revoke", user,
                  "etcdctl user revoke-role " + user + " locker while " + c.name(w) +
                      " held the lock: " + (r.exit_code == 0 ? r.out : r.err),
                  at);
    c.idle(ms(c.uniform(c.ttl_ms(), 2 * c.ttl_ms())));
    const auto back = etcd.etcdctl({kRoot, "user", "grant-role", user, "locker"});
    c.fault_end("auth-revoke", user, "granted back: " + (back.exit_code == 0 ? back.out : back.err));
    c.idle(ms(c.uniform(1000, 2000)));
  }
}

// Member 0 cut off from the others for 2 leases while a client of member 0
// only holds the lock: nothing it sends them arrives (their links to its
// peer port freeze in a proxy), its client port stays up. A leader so cut
// is deposed by the others; a follower can no longer commit for its
// clients.
void etcd_member_cut(RunCtx& c) {
  c.idle(ms(1000));
  while (c.running()) {
    auto& etcd = *c.etcd_cluster();
    const int w = holder_of_server0(c);
    if (w < 0) {
      c.idle(ms(200));
      continue;
    }
    const int leader = etcd.leader();
    const auto held = freeze_peer_links(
        c, ms(2 * c.ttl_ms()), "member-cut", member_label(0),
        "a proxy freezes every link the other members hold to member 0 (" + role_of(0, leader) + ") while " +
            c.name(w) + (w % 2 == 1 ? ", a client of member 0 only," : ", a client of all three,") + " held the lock");
    const bool led = etcd.wait_leader(ms(10000));
    c.fault_end(
        "member-cut", member_label(0),
        "healed; " + std::to_string(held) + " chunks held meanwhile; " + (led ? "a leader" : "NO leader after 10 s"));
    c.idle(ms(c.uniform(1500, 2500)));
  }
}

// An operator's `etcdctl del` of the key that holds the lock (the oldest in
// line), as one clears a lock believed stuck.
void etcd_operator_delete(RunCtx& c) {
  c.idle(ms(500));
  while (c.running()) {
    const int w = c.holder_granted_after(mono_ns());
    auto& etcd = *c.etcd_cluster();
    const auto line = etcd.keys("torture/");
    if (w >= 0 && !line.empty()) {
      const std::int64_t at = mono_ns();
      const auto r = etcd.etcdctl({"del", line.front().first});
      c.fault_instant("operator-delete", c.name(w),
                      "etcdctl del " + line.front().first + " (create revision " + std::to_string(line.front().second) +
                          ", the oldest of " + std::to_string(line.size()) + " in line) while " + c.name(w) +
                          " held the lock: " + (r.exit_code == 0 ? r.out : r.err),
                      at);
    }
    c.idle(ms(c.uniform(c.ttl_ms(), 2 * c.ttl_ms())));
  }
}

// The cluster's history compacted up to the revision of the moment, every
// 0.2-0.6 s, while clients wait in line and watch.
void etcd_compaction(RunCtx& c) {
  c.idle(ms(500));
  while (c.running()) {
    auto& etcd = *c.etcd_cluster();
    const int waiting = c.find_worker(Phase::acquiring, ms(200)) >= 0 ? 1 : 0;
    const std::int64_t rev = revision_now(etcd);
    if (rev > 0) {
      const std::int64_t at = mono_ns();
      const auto r = etcd.etcdctl({"compact", std::to_string(rev)});
      c.fault_instant("compact", "cluster",
                      "etcdctl compact " + std::to_string(rev) + (waiting ? " with a client waiting" : "") + ": " +
                          (r.exit_code == 0 ? r.out : r.err),
                      at);
    }
    c.idle(ms(c.uniform(200, 600)));
  }
}

}  // namespace

void add_etcd_scenarios(std::vector<Scenario>& v) {
  add(v, "etcd-leader-kill", "etcd: SIGKILL the leader while a lock is held, restart it a second later",
      etcd_leader_kill, safe(1), kEtcd);
  add(v, "etcd-member-pause", "etcd: SIGSTOP a member (the leader or a follower) for 1.5-2.5 leases while held",
      etcd_member_pause, safe(1), kEtcd);
  {
    Scenario& s = add(v, "etcd-member-cut",
                      "etcd: member 0 cut off from the others (what it sends them frozen, client port up) for 2 "
                      "leases while a client of member 0 only holds the lock",
                      etcd_member_cut,
                      safe(1,
                           "no overlap: a holder on a cut-off member stops believing before the others' leader "
                           "grants the lock to another"),
                      kEtcd);
    s.peer_proxies = true;
    // Holders that hold into the cut (it starts right after a grant), short
    // enough that a 4 s run still makes enough grants to judge.
    s.think_min_leases = 1.0;
    s.think_leases = 2.0;
    s.dlock.min_grants = 3;
  }
  add(v, "etcd-stream-pause",
      "etcd: SIGSTOP the follower carrying the clients' watch streams for 1.5-2.5 leases while held, others waiting",
      etcd_stream_pause,
      safe(1, "no overlap, no waiter asleep: a silent stream is probed and its watches move to another member"), kEtcd);
  {
    Scenario& s = add(v, "etcd-auth-revoke",
                      "etcd: the holder's user loses its role (etcdctl user revoke-role) for 1-2 leases while held",
                      etcd_auth_revoke,
                      safe(1,
                           "no overlap: a holder whose release is refused lets its lease go, so the lock frees "
                           "within one lease and no sooner"),
                      kEtcd);
    s.prepare = etcd_auth_prepare;
    s.user = [](int w) { return login_of(w) + ":" + login_of(w); };
  }
  {
    Scenario& s = add(v, "etcd-operator-delete", "etcd: an operator deletes the holder's key (etcdctl del) while held",
                      etcd_operator_delete,
                      overlap_ok("an operator's delete frees a held lock at once (documented): the holder is told "
                                 "(lost_token) and fencing rejects its late writes"),
                      kEtcd);
    s.think_min_leases = 0.3;  // holds long enough to be found and deleted
  }
  add(v, "etcd-compaction", "etcd: the history compacted to the current revision every 0.2-0.6 s, clients waiting",
      etcd_compaction, safe(1, "no overlap, no waiter stuck: compaction never loses a release"), kEtcd);
}

}  // namespace torture

#include "scenarios_common.hpp"

#include "run_ctx.hpp"

namespace torture {

using ms = std::chrono::milliseconds;

Expectation safe(std::int64_t min_faults, std::string why) {
  Expectation e;
  e.min_faults = min_faults;
  e.assumption = std::move(why);
  return e;
}

Expectation overlap_ok(const std::string& why, bool fence_anomaly) {
  Expectation e;
  e.overlap_allowed = true;
  e.lost_updates_allowed = true;
  e.fence_anomaly_allowed = fence_anomaly;
  e.min_faults = 1;
  e.assumption = why;
  return e;
}

Scenario& add(std::vector<Scenario>& v, std::string name, std::string summary, std::function<void(RunCtx&)> nemesis,
              Expectation expect, unsigned setups) {
  Scenario s{std::move(name), std::move(summary), "", false, std::move(nemesis), {}, std::move(expect)};
  s.setups = setups;
  v.push_back(std::move(s));
  return v.back();
}

void idle_to_end(RunCtx& c) {
  while (c.running()) c.idle(ms(20));
}

std::string holder_or_nobody(RunCtx& c, int w) { return w >= 0 ? c.name(w) : std::string("nobody"); }

int holder_of_server0(RunCtx& c) {
  int w = -1;
  const std::int64_t give_up = mono_ns() + 2 * c.ttl_ms() * 1'000'000;
  for (std::int64_t from = mono_ns(); c.running() && w < 0;) {
    const int h = c.holder_granted_after(from, give_up);
    if (h < 0) break;
    if (h % 2 == 1)
      w = h;
    else
      from = c.slots->at(h).since_ns.load();  // wait for the next grant
  }
  if (w < 0 && c.running()) w = c.find_worker(Phase::holding, ms(200));
  return w;
}

std::uint64_t freeze_peer_links(RunCtx& c, ms d, const std::string& kind, const std::string& target,
                                const std::string& proof) {
  const auto before = c.peer_net.stats("").held_chunks;
  const std::int64_t at = mono_ns();
  c.peer_net.blackhole("", true);
  c.fault_start(kind, target, proof, at);
  c.idle(d);
  const auto during = c.peer_net.stats("").held_chunks;
  c.peer_net.blackhole("", false);
  return during - before;
}

std::string node_label(RunCtx& c, int i) { return c.node_count() == 1 ? "server" : "node" + std::to_string(i); }

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

std::string query_or_error(PgProc& pg, const std::string& sql) {
  try {
    return pg.query(sql);
  } catch (const std::exception& e) {
    return std::string("? (") + e.what() + ")";
  }
}

}  // namespace torture

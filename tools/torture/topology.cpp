#include "topology.hpp"

#include <filesystem>
#include <fstream>

#include "run_ctx.hpp"
#include "server_proc.hpp"

namespace torture {
namespace {

namespace fs = std::filesystem;
using dlock::tools::sentinel_hook_index;
using dlock::tools::TopologyNode;

std::string nat_entries(const RunCtx& c, const std::vector<std::uint16_t>& links) {
  std::string out;
  for (std::size_t i = 0; i < links.size(); ++i)
    out += std::string(i ? "&" : "") + "nat=127.0.0.1:" + std::to_string(c.announced.at(i)) +
           "%3E127.0.0.1:" + std::to_string(links[i]);
  return out;
}

}  // namespace

void start_topology(RunCtx& c, const std::string& topology, const std::string& redis_server, const std::string& dir) {
  const bool cluster = topology == "cluster";
  const int count = cluster ? 6 : 2;
  std::vector<TopologyNode> nodes;
  for (int i = 0; i < count; ++i) {
    LockNode n;
    ServerSpec spec;
    spec.binary = redis_server;
    spec.dir = fs::absolute(fs::path(dir) / ("lock-server-" + std::to_string(i))).string();
    fs::create_directories(spec.dir);
    spec.port = free_port();
    n.proxy = std::make_unique<Proxy>("127.0.0.1", spec.port);
    const std::uint16_t announced = n.proxy->add_link("announce");
    n.proxy->start();
    TopologyNode t{spec.port, announced, 0};
    if (cluster) {
      t.bus = free_port();
      spec.extra_args = dlock::tools::cluster_server_args();
      for (const std::string& a :
           {std::string("--cluster-port"), std::to_string(t.bus), std::string("--cluster-announce-ip"),
            std::string("127.0.0.1"), std::string("--cluster-announce-port"), std::to_string(announced),
            std::string("--cluster-announce-bus-port"), std::to_string(t.bus)})
        spec.extra_args.push_back(a);
    } else {
      spec.extra_args = {"--repl-diskless-sync-delay", "0",
                         "--replica-announce-ip",      "127.0.0.1",
                         "--replica-announce-port",    std::to_string(announced)};
      if (i == 1)
        for (const std::string& a :
             {std::string("--replicaof"), std::string("127.0.0.1"), std::to_string(c.announced.at(0))})
          spec.extra_args.push_back(a);
    }
    n.server = std::make_unique<ServerProc>(spec);
    n.server->start();
    n.admin = std::make_unique<SyncRedis>("127.0.0.1", spec.port, std::chrono::milliseconds(2000));
    c.net.add(n.proxy.get());
    c.announced.push_back(announced);
    c.nodes.push_back(std::move(n));
    nodes.push_back(t);
  }
  dlock::tools::TopologyHooks hooks;
  hooks.running = [&c](int i) {
    if (i >= sentinel_hook_index(0)) {
      const auto k = static_cast<std::size_t>(i - sentinel_hook_index(0));
      return k < c.sentinels.size() && c.sentinels[k]->pid() > 0;
    }
    return c.node(i).server->pid() > 0;
  };
  hooks.tails = [dir] { return "(the servers' logs are in " + dir + ")"; };
  if (cluster) {
    c.cluster = std::make_unique<dlock::tools::ClusterAdmin>(std::move(nodes), 3, std::move(hooks));
    c.cluster->form();
    return;
  }
  std::vector<std::uint16_t> ports;
  for (int k = 0; k < 3; ++k) {
    ServerSpec spec;
    spec.binary = redis_server;
    spec.dir = fs::absolute(fs::path(dir) / ("sentinel-" + std::to_string(k))).string();
    fs::create_directories(spec.dir);
    spec.config_file = spec.dir + "/sentinel.conf";
    std::ofstream(spec.config_file) << dlock::tools::SentinelAdmin::sentinel_config(kSentinelMaster, c.announced.at(0));
    spec.extra_args = {"--sentinel"};
    c.sentinels.push_back(std::make_unique<ServerProc>(spec));
    c.sentinels.back()->start();
    ports.push_back(c.sentinels.back()->port());
  }
  c.sentinel = std::make_unique<dlock::tools::SentinelAdmin>(std::move(nodes), std::move(ports), kSentinelMaster,
                                                             std::move(hooks));
  c.sentinel->wait_formed();
}

std::string topology_url(const RunCtx& c, const std::string& topology, const std::vector<std::uint16_t>& links) {
  if (topology == "cluster")
    return "redis-cluster://" + torture_userinfo() + "127.0.0.1:" + std::to_string(links.at(0)) +
           ",127.0.0.1:" + std::to_string(links.at(1)) + "?" + nat_entries(c, links);
  std::string url = "redis-sentinel://" + torture_userinfo();
  for (std::size_t k = 0; k < c.sentinels.size(); ++k)
    url += std::string(k ? "," : "") + "127.0.0.1:" + std::to_string(c.sentinels[k]->port());
  return url + "/" + kSentinelMaster + "?" + nat_entries(c, links);
}

int lock_master(RunCtx& c) {
  if (c.cluster) return c.cluster->master_of_slot(c.cluster->slot_of(kTortureLockKey));
  return c.sentinel ? c.sentinel->master_index() : -1;
}

int replica_of(RunCtx& c, int master) {
  const std::string told = "master_port:" + std::to_string(c.announced.at(static_cast<std::size_t>(master))) + "\r";
  for (int i = 0; i < c.node_count(); ++i) {
    if (i == master || c.node(i).server->pid() <= 0) continue;
    if (c.node(i).admin->cmd({"INFO", "replication"}).str.find(told) != std::string::npos) return i;
  }
  return -1;
}

}  // namespace torture

#include "support/redis_cluster.hpp"

namespace dlock::test {
namespace {

RedisServerOptions cluster_options(const std::vector<std::string>& extra_args) {
  RedisServerOptions o;
  o.cluster_bus = true;
  o.extra_args = tools::cluster_server_args();
  o.extra_args.insert(o.extra_args.end(), extra_args.begin(), extra_args.end());
  return o;
}

}  // namespace

RedisCluster::RedisCluster(int masters, int replicas_per_master, std::vector<std::string> extra_args) {
  const int total = masters * (1 + replicas_per_master);
  std::vector<tools::TopologyNode> ports;
  for (int i = 0; i < total; ++i) {
    nodes_.push_back(std::make_unique<RedisServer>(cluster_options(extra_args)));
    ports.push_back({static_cast<std::uint16_t>(nodes_.back()->port())});
  }
  tools::TopologyHooks hooks;
  hooks.running = [this](int i) { return nodes_.at(static_cast<std::size_t>(i))->running(); };
  hooks.tails = [this] { return tails(); };
  admin_ = std::make_unique<tools::ClusterAdmin>(std::move(ports), masters, std::move(hooks));
  admin_->form();
}

RedisCluster::~RedisCluster() = default;  // each RedisServer stops its own process

std::string RedisCluster::url() const {
  std::string out = "redis-cluster://" + nodes_[0]->host_port();
  if (nodes_.size() > 1) out += "," + nodes_[1]->host_port();
  return out;
}

std::string RedisCluster::tails() const {
  std::string out;
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    out += "--- node " + std::to_string(i) + " ---\n" + nodes_[i]->log_tail(10) + "\n";
  return out;
}

}  // namespace dlock::test

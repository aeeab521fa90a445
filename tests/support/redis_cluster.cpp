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

RedisCluster::RedisCluster(int masters, int replicas_per_master, std::vector<std::string> extra_args, bool tls) {
  const int total = masters * (1 + replicas_per_master);
  if (tls) {
    // One certificate for every node, for serving and (cluster bus,
    // replication) for connecting to its peers: both key usages.
    tls_dir_ = std::make_unique<TempDir>();
    make_ca(tls_dir_->path(), "ca");
    make_leaf(tls_dir_->path(), "node", "127.0.0.1",
              "basicConstraints=CA:FALSE\n"
              "keyUsage=critical,digitalSignature\n"
              "extendedKeyUsage=serverAuth,clientAuth\n"
              "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  }
  std::vector<tools::TopologyNode> ports;
  for (int i = 0; i < total; ++i) {
    std::vector<std::string> args = extra_args;
    std::uint16_t bus = 0;
    if (tls) {
      // With tls-cluster the bus listens at the TLS port + 10000.
      const int port = free_port_pair(10000);
      tls_ports_.push_back(port);
      bus = static_cast<std::uint16_t>(port + 10000);
      args.insert(args.end(),
                  {"--tls-port", std::to_string(port), "--tls-cert-file", tls_dir_->file("node.crt"), "--tls-key-file",
                   tls_dir_->file("node.key"), "--tls-ca-cert-file", tls_dir_->file("ca.crt"), "--tls-auth-clients",
                   "no", "--tls-cluster", "yes", "--tls-replication", "yes"});
    }
    nodes_.push_back(std::make_unique<RedisServer>(cluster_options(args)));
    ports.push_back({static_cast<std::uint16_t>(nodes_.back()->port()), 0, bus});
  }
  tools::TopologyHooks hooks;
  hooks.running = [this](int i) { return nodes_.at(static_cast<std::size_t>(i))->running(); };
  hooks.tails = [this] { return tails(); };
  admin_ = std::make_unique<tools::ClusterAdmin>(std::move(ports), masters, std::move(hooks));
  admin_->form();
}

RedisCluster::~RedisCluster() = default;  // each RedisServer stops its own process

std::string RedisCluster::url() const {
  if (tls_dir_) {
    std::string out = "redis-cluster+tls://127.0.0.1:" + std::to_string(tls_ports_[0]);
    if (tls_ports_.size() > 1) out += ",127.0.0.1:" + std::to_string(tls_ports_[1]);
    return out + "?cacert=" + tls_dir_->file("ca.crt");
  }
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

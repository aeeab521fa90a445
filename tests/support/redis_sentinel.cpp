#include "support/redis_sentinel.hpp"

#include <fstream>

namespace dlock::test {

RedisSentinelSet::RedisSentinelSet(bool tls) : tls_(tls) {
  std::vector<std::string> tls_args;
  if (tls) {
    // One certificate for every server, for serving and (replication, the
    // sentinels' links) for connecting: both key usages.
    make_ca(dir_.path(), "ca");
    make_leaf(dir_.path(), "node", "127.0.0.1",
              "basicConstraints=CA:FALSE\n"
              "keyUsage=critical,digitalSignature\n"
              "extendedKeyUsage=serverAuth,clientAuth\n"
              "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
    tls_args = {"--tls-cert-file",    dir_.file("node.crt"),
                "--tls-key-file",     dir_.file("node.key"),
                "--tls-ca-cert-file", dir_.file("ca.crt"),
                "--tls-auth-clients", "no",
                "--tls-replication",  "yes"};
  }
  // The port a data node tells (replicas to their master, sentinels to
  // clients): its TLS port with tls.
  std::vector<tools::TopologyNode> nodes;
  auto start_data = [&](std::vector<std::string> args) {
    std::uint16_t told = 0;
    if (tls) {
      told = static_cast<std::uint16_t>(free_port());
      args.insert(args.end(), {"--tls-port", std::to_string(told)});
      args.insert(args.end(), tls_args.begin(), tls_args.end());
    }
    RedisServerOptions o;
    o.extra_args = std::move(args);
    data_.push_back(std::make_unique<RedisServer>(o));
    nodes.push_back({static_cast<std::uint16_t>(data_.back()->port()), told});
  };
  start_data({"--repl-diskless-sync-delay", "0"});
  start_data({"--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1", std::to_string(nodes[0].told())});
  std::vector<std::uint16_t> sentinel_ports;
  for (int i = 0; i < 3; ++i) {
    const std::string conf = dir_.file("sentinel" + std::to_string(i) + ".conf");
    std::ofstream(conf) << tools::SentinelAdmin::sentinel_config(kName, nodes[0].told());
    RedisServerOptions s;
    s.config_file = conf;
    s.extra_args = {"--sentinel"};
    if (tls) {
      sentinel_tls_ports_.push_back(free_port());
      s.extra_args.insert(s.extra_args.end(), {"--tls-port", std::to_string(sentinel_tls_ports_.back())});
      s.extra_args.insert(s.extra_args.end(), tls_args.begin(), tls_args.end());
    }
    sentinels_.push_back(std::make_unique<RedisServer>(s));
    sentinel_ports.push_back(static_cast<std::uint16_t>(sentinels_.back()->port()));
  }
  tools::TopologyHooks hooks;
  hooks.running = [this](int i) {
    const auto k = static_cast<std::size_t>(i - tools::sentinel_hook_index(0));
    return k < sentinels_.size() ? sentinels_[k]->running() : data_.at(static_cast<std::size_t>(i))->running();
  };
  hooks.tails = [this] { return tails(); };
  admin_ = std::make_unique<tools::SentinelAdmin>(std::move(nodes), std::move(sentinel_ports), kName, std::move(hooks));
  admin_->wait_formed();
}

RedisSentinelSet::~RedisSentinelSet() {
  sentinels_.clear();  // first: no failover while the data nodes stop
  data_.clear();
}

std::string RedisSentinelSet::url() const {
  std::string out = tls_ ? "redis-sentinel+tls://" : "redis-sentinel://";
  for (std::size_t i = 0; i < sentinels_.size(); ++i)
    out += (i ? "," : "") + (tls_ ? "127.0.0.1:" + std::to_string(sentinel_tls_ports_[i]) : sentinels_[i]->host_port());
  out += "/" + std::string(kName);
  return tls_ ? out + "?cacert=" + dir_.file("ca.crt") : out;
}

std::string RedisSentinelSet::tails() const {
  std::string out;
  for (std::size_t i = 0; i < data_.size(); ++i)
    out += "--- data " + std::to_string(i) + " ---\n" + data_[i]->log_tail(8);
  for (std::size_t i = 0; i < sentinels_.size(); ++i)
    out += "--- sentinel " + std::to_string(i) + " ---\n" + sentinels_[i]->log_tail(8);
  return out;
}

}  // namespace dlock::test

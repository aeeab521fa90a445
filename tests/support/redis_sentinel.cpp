#include "support/redis_sentinel.hpp"

#include <fstream>

namespace dlock::test {

RedisSentinelSet::RedisSentinelSet() {
  RedisServerOptions master;
  master.extra_args = {"--repl-diskless-sync-delay", "0"};
  data_.push_back(std::make_unique<RedisServer>(master));
  RedisServerOptions replica = master;
  replica.extra_args.insert(replica.extra_args.end(), {"--replicaof", "127.0.0.1", std::to_string(data_[0]->port())});
  data_.push_back(std::make_unique<RedisServer>(replica));
  std::vector<std::uint16_t> sentinel_ports;
  for (int i = 0; i < 3; ++i) {
    const std::string conf = dir_.file("sentinel" + std::to_string(i) + ".conf");
    std::ofstream(conf) << tools::SentinelAdmin::sentinel_config(kName, static_cast<std::uint16_t>(data_[0]->port()));
    RedisServerOptions s;
    s.config_file = conf;
    s.extra_args = {"--sentinel"};
    sentinels_.push_back(std::make_unique<RedisServer>(s));
    sentinel_ports.push_back(static_cast<std::uint16_t>(sentinels_.back()->port()));
  }
  tools::TopologyHooks hooks;
  hooks.running = [this](int i) {
    const auto k = static_cast<std::size_t>(i - tools::sentinel_hook_index(0));
    return k < sentinels_.size() ? sentinels_[k]->running() : data_.at(static_cast<std::size_t>(i))->running();
  };
  hooks.tails = [this] { return tails(); };
  admin_ = std::make_unique<tools::SentinelAdmin>(
      std::vector<tools::TopologyNode>{{static_cast<std::uint16_t>(data_[0]->port())},
                                       {static_cast<std::uint16_t>(data_[1]->port())}},
      std::move(sentinel_ports), kName, std::move(hooks));
  admin_->wait_formed();
}

RedisSentinelSet::~RedisSentinelSet() {
  sentinels_.clear();  // first: no failover while the data nodes stop
  data_.clear();
}

std::string RedisSentinelSet::url() const {
  std::string out = "redis-sentinel://";
  for (std::size_t i = 0; i < sentinels_.size(); ++i) out += (i ? "," : "") + sentinels_[i]->host_port();
  return out + "/" + kName;
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

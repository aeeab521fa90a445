#include "support/redis_sentinel.hpp"

#include <fstream>
#include <stdexcept>
#include <thread>

namespace dlock::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string field(const std::string& text, const std::string& name) {
  // redis-cli prints a flat map one item per line: "name\nvalue\n..."
  const std::string key = name + "\n";
  const auto at = text.find(key);
  if (at == std::string::npos || (at > 0 && text[at - 1] != '\n')) return {};
  const auto start = at + key.size();
  return text.substr(start, text.find('\n', start) - start);
}

}  // namespace

RedisSentinelSet::RedisSentinelSet() {
  RedisServerOptions master;
  master.extra_args = {"--repl-diskless-sync-delay", "0"};
  data_.push_back(std::make_unique<RedisServer>(master));
  RedisServerOptions replica = master;
  replica.extra_args.insert(replica.extra_args.end(), {"--replicaof", "127.0.0.1", std::to_string(data_[0]->port())});
  data_.push_back(std::make_unique<RedisServer>(replica));
  for (int i = 0; i < 3; ++i) {
    const std::string conf = dir_.file("sentinel" + std::to_string(i) + ".conf");
    std::ofstream(conf) << "sentinel monitor " << kName << " 127.0.0.1 " << data_[0]->port() << " 2\n"
                        << "sentinel down-after-milliseconds " << kName << " 1000\n"
                        << "sentinel failover-timeout " << kName << " 3000\n";
    RedisServerOptions s;
    s.config_file = conf;
    s.extra_args = {"--sentinel"};
    sentinels_.push_back(std::make_unique<RedisServer>(s));
  }
  wait_until("the sentinels know each other and the replica", milliseconds(30000), [&] {
    for (auto& s : sentinels_) {
      const std::string m = s->cli({"SENTINEL", "MASTER", kName});
      if (field(m, "num-other-sentinels") != "2" || field(m, "num-slaves") != "1") return false;
    }
    return data_[1]->cli({"INFO", "replication"}).find("master_link_status:up") != std::string::npos;
  });
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

int RedisSentinelSet::master_index() const {
  int agreed = -2;
  for (const auto& s : sentinels_) {
    if (!s->running()) continue;
    const std::string addr = s->cli({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", kName});
    const std::string port = addr.substr(addr.find('\n') + 1);
    int found = -1;
    for (std::size_t i = 0; i < data_.size(); ++i)
      if (std::to_string(data_[i]->port()) == port) found = static_cast<int>(i);
    if (agreed == -2) agreed = found;
    if (found != agreed) return -1;
  }
  return agreed < 0 ? -1 : agreed;
}

void RedisSentinelSet::wait_master(int i, milliseconds limit) const {
  wait_until("data node " + std::to_string(i) + " is master", limit, [&] {
    return master_index() == i && data_[static_cast<std::size_t>(i)]->cli({"ROLE"}).rfind("master", 0) == 0;
  });
}

void RedisSentinelSet::failover() {
  const int now = master_index();
  if (now < 0) throw std::logic_error("failover: the sentinels do not agree on a master");
  std::string out;
  // Refused while a previous failover is still settling: asked again.
  wait_until("a sentinel accepts SENTINEL FAILOVER", milliseconds(30000), [&] {
    out = sentinels_[0]->cli({"SENTINEL", "FAILOVER", kName});
    return out == "OK";
  });
  wait_master(1 - now);
}

void RedisSentinelSet::wait_until(const std::string& what, milliseconds limit,
                                  const std::function<bool()>& done) const {
  wait_until_or_throw("RedisSentinelSet: " + what, limit, done, [this] { return tails(); });
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

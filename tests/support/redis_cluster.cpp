#include "support/redis_cluster.hpp"

#include <chrono>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dlock::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

RedisServerOptions cluster_options() {
  RedisServerOptions o;
  o.cluster_bus = true;
  // A short node timeout makes failovers quick; validity factor 0 lets any
  // replica take over however long it was cut off.
  o.extra_args = {"--cluster-enabled",
                  "yes",
                  "--cluster-config-file",
                  "nodes.conf",
                  "--cluster-node-timeout",
                  "1000",
                  "--cluster-replica-validity-factor",
                  "0",
                  "--cluster-require-full-coverage",
                  "yes"};
  return o;
}

}  // namespace

RedisCluster::RedisCluster(int masters, int replicas_per_master) : masters_(masters) {
  const int total = masters * (1 + replicas_per_master);
  for (int i = 0; i < total; ++i) nodes_.push_back(std::make_unique<RedisServer>(cluster_options()));
  for (int i = 0; i < masters; ++i) {
    const int lo = 16384 * i / masters, hi = 16384 * (i + 1) / masters - 1;
    cli(i, {"CLUSTER", "ADDSLOTSRANGE", std::to_string(lo), std::to_string(hi)});
  }
  for (int i = 1; i < total; ++i) cli(0, {"CLUSTER", "MEET", "127.0.0.1", std::to_string(node(i).port())});
  wait_until("every node knows every other", milliseconds(30000), [&] {
    for (int i = 0; i < total; ++i)
      if (lines_of(cli(i, {"CLUSTER", "NODES"})).size() != static_cast<std::size_t>(total)) return false;
    return true;
  });
  for (int i = masters; i < total; ++i) {
    const std::string master = id(i % masters);
    // A replica learns of its master through gossip: until then REPLICATE fails.
    wait_until("node " + std::to_string(i) + " may replicate", milliseconds(30000), [&] {
      return cli(i, {"CLUSTER", "REPLICATE", master}).rfind("OK", 0) == 0;
    });
  }
  wait_until("the replicas are in sync", milliseconds(30000), [&] {
    for (int i = masters; i < total; ++i)
      if (cli(i, {"INFO", "replication"}).find("master_link_status:up") == std::string::npos) return false;
    return true;
  });
  wait_ok();
}

RedisCluster::~RedisCluster() = default;  // each RedisServer stops its own process

std::string RedisCluster::url() const {
  std::string out = "redis-cluster://" + nodes_[0]->host_port();
  if (nodes_.size() > 1) out += "," + nodes_[1]->host_port();
  return out;
}

std::string RedisCluster::cli(int i, const std::vector<std::string>& args) const {
  return nodes_.at(static_cast<std::size_t>(i))->cli(args);
}

std::string RedisCluster::id(int i) const { return cli(i, {"CLUSTER", "MYID"}); }

int RedisCluster::slot_of(const std::string& key) const {
  for (int i = 0; i < size(); ++i)
    if (nodes_[static_cast<std::size_t>(i)]->running()) return std::stoi(cli(i, {"CLUSTER", "KEYSLOT", key}));
  throw std::runtime_error("no node is running");
}

int RedisCluster::index_of_port(int port) const {
  for (int i = 0; i < size(); ++i)
    if (nodes_[static_cast<std::size_t>(i)]->port() == port) return i;
  return -1;
}

// CLUSTER NODES: "<id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch>
// <link> <slot ranges...>", ranges "a-b" or "a" (or "[a->-id]" while moving).
int RedisCluster::master_of_slot(int slot, int asked) const {
  if (asked < 0)
    for (int i = 0; i < size() && asked < 0; ++i)
      if (nodes_[static_cast<std::size_t>(i)]->running()) asked = i;
  for (const std::string& line : lines_of(cli(asked, {"CLUSTER", "NODES"}))) {
    auto w = words_of(line);
    if (w.size() < 8 || w[2].find("master") == std::string::npos || w[2].find("fail") != std::string::npos) continue;
    for (std::size_t k = 8; k < w.size(); ++k) {
      if (w[k].front() == '[') continue;
      const auto dash = w[k].find('-');
      const int lo = std::stoi(w[k].substr(0, dash));
      const int hi = dash == std::string::npos ? lo : std::stoi(w[k].substr(dash + 1));
      if (slot >= lo && slot <= hi) {
        const auto colon = w[1].find(':'), at = w[1].find('@');
        return index_of_port(std::stoi(w[1].substr(colon + 1, at - colon - 1)));
      }
    }
  }
  return -1;
}

bool RedisCluster::is_master(int i) const { return cli(i, {"ROLE"}).rfind("master", 0) == 0; }

void RedisCluster::migrate_slot(int slot, int to, int stop_before) {
  const int from = master_of_slot(slot);
  if (from < 0 || from == to) throw std::logic_error("migrate_slot: bad source or target");
  const std::string s = std::to_string(slot);
  cli(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", id(from)});
  cli(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", id(to)});
  if (stop_before == 1) return;
  for (;;) {
    auto keys = lines_of(cli(from, {"CLUSTER", "GETKEYSINSLOT", s, "1000"}));
    if (keys.empty()) break;
    std::vector<std::string> args = {"MIGRATE", "127.0.0.1", std::to_string(node(to).port()), "", "0", "5000", "KEYS"};
    args.insert(args.end(), keys.begin(), keys.end());
    const std::string out = cli(from, args);
    if (out != "OK" && out != "NOKEY") throw std::runtime_error("MIGRATE failed: " + out);
  }
  if (stop_before == 2) return;
  const std::string target = id(to);
  cli(to, {"CLUSTER", "SETSLOT", s, "NODE", target});
  cli(from, {"CLUSTER", "SETSLOT", s, "NODE", target});
  for (int i = 0; i < size(); ++i)
    if (i != to && i != from && nodes_[static_cast<std::size_t>(i)]->running() && is_master(i))
      cli(i, {"CLUSTER", "SETSLOT", s, "NODE", target});
}

void RedisCluster::failover(int replica, const std::string& mode) {
  std::vector<std::string> args = {"CLUSTER", "FAILOVER"};
  if (!mode.empty()) args.push_back(mode);
  const std::string out = cli(replica, args);
  if (out != "OK") throw std::runtime_error("CLUSTER FAILOVER failed: " + out);
  wait_until("node " + std::to_string(replica) + " is master", milliseconds(30000), [&] { return is_master(replica); });
  wait_ok();
}

void RedisCluster::wait_ok(milliseconds limit) const {
  wait_until("the cluster is ok", limit, [&] {
    int first = -1;
    for (int i = 0; i < size(); ++i) {
      if (!nodes_[static_cast<std::size_t>(i)]->running()) continue;
      if (cli(i, {"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) return false;
      if (first < 0) first = i;
      for (int slot : {0, 8000, 16383}) {
        const int m = master_of_slot(slot, i);
        if (m < 0 || !nodes_[static_cast<std::size_t>(m)]->running() || m != master_of_slot(slot, first)) return false;
      }
    }
    return first >= 0;
  });
}

void RedisCluster::wait_until(const std::string& what, milliseconds limit, const std::function<bool()>& done) const {
  wait_until_or_throw("RedisCluster: " + what, limit, done, [this] { return tails(); });
}

std::string RedisCluster::tails() const {
  std::string out;
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    out += "--- node " + std::to_string(i) + " ---\n" + nodes_[i]->log_tail(10) + "\n";
  return out;
}

}  // namespace dlock::test

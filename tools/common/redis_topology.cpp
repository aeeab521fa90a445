#include "common/redis_topology.hpp"

#include <sstream>
#include <stdexcept>
#include <thread>

namespace dlock::tools {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kAdminTimeout{5000};

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

// A flat map as Reply::text writes it, "name\nvalue\n...": the value of `name`.
std::string field(const std::string& text, const std::string& name) {
  const std::string key = name + "\n";
  for (std::size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
    if (at > 0 && text[at - 1] != '\n') continue;
    const auto start = at + key.size();
    return text.substr(start, text.find('\n', start) - start);
  }
  return {};
}

std::unique_ptr<SyncRedis> admin(std::uint16_t port) {
  return std::make_unique<SyncRedis>("127.0.0.1", port, kAdminTimeout);
}

}  // namespace

void wait_until(const std::string& what, milliseconds limit, const std::function<bool()>& done,
                const TopologyHooks& hooks) {
  const auto end = Clock::now() + limit;
  for (;;) {
    try {
      if (done()) return;
    } catch (const std::exception&) {
      // a node restarting answered garbage: ask again
    }
    if (Clock::now() >= end)
      throw std::runtime_error("timed out waiting until " + what + " (" + std::to_string(limit.count()) + " ms)\n" +
                               hooks.tails());
    std::this_thread::sleep_for(milliseconds(20));
  }
}

// ---- Cluster --------------------------------------------------------------

std::vector<std::string> cluster_server_args() {
  return {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000",
          "--cluster-replica-validity-factor", "0", "--cluster-require-full-coverage", "yes",
          // A replica's first sync starts at once, not after the default 5 s
          // wait for more replicas to share the transfer.
          "--repl-diskless-sync-delay", "0"};
}

ClusterAdmin::ClusterAdmin(std::vector<TopologyNode> nodes, int masters, TopologyHooks hooks)
    : nodes_(std::move(nodes)), masters_(masters), hooks_(std::move(hooks)) {
  for (const TopologyNode& n : nodes_) conns_.push_back(admin(n.port));
}

SyncRedis& ClusterAdmin::conn(int i) const { return *conns_.at(static_cast<std::size_t>(i)); }

std::string ClusterAdmin::cli(int i, const std::vector<std::string>& args) const { return conn(i).cmd(args).text(); }

void ClusterAdmin::form() {
  const int total = size();
  for (int i = 0; i < masters_; ++i) {
    const int lo = 16384 * i / masters_, hi = 16384 * (i + 1) / masters_ - 1;
    cli(i, {"CLUSTER", "ADDSLOTSRANGE", std::to_string(lo), std::to_string(hi)});
  }
  for (int i = 1; i < total; ++i) {
    std::vector<std::string> meet = {"CLUSTER", "MEET", "127.0.0.1", std::to_string(node(i).port)};
    if (node(i).bus) meet.push_back(std::to_string(node(i).bus));
    cli(0, meet);
  }
  wait_until(
      "every cluster node knows every other", milliseconds(30000),
      [&] {
        for (int i = 0; i < total; ++i)
          if (lines_of(cli(i, {"CLUSTER", "NODES"})).size() != static_cast<std::size_t>(total)) return false;
        return true;
      },
      hooks_);
  for (int i = masters_; i < total; ++i) {
    const std::string master = id(i % masters_);
    // A replica learns of its master through gossip: until then REPLICATE fails.
    wait_until(
        "cluster node " + std::to_string(i) + " may replicate", milliseconds(30000),
        [&] {
          return cli(i, {"CLUSTER", "REPLICATE", master}).rfind("OK", 0) == 0;
        },
        hooks_);
  }
  wait_until(
      "the cluster's replicas are in sync", milliseconds(30000),
      [&] {
        for (int i = masters_; i < total; ++i)
          if (cli(i, {"INFO", "replication"}).find("master_link_status:up") == std::string::npos) return false;
        return true;
      },
      hooks_);
  wait_ok();
}

std::string ClusterAdmin::id(int i) const { return cli(i, {"CLUSTER", "MYID"}); }

int ClusterAdmin::slot_of(const std::string& key) const {
  for (int i = 0; i < size(); ++i)
    if (hooks_.running(i)) return std::stoi(cli(i, {"CLUSTER", "KEYSLOT", key}));
  throw std::runtime_error("no cluster node is running");
}

int ClusterAdmin::index_of_told(int port) const {
  for (int i = 0; i < size(); ++i)
    if (node(i).told() == port) return i;
  return -1;
}

// CLUSTER NODES: "<id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch>
// <link> <slot ranges...>", ranges "a-b" or "a" (or "[a->-id]" while moving).
int ClusterAdmin::master_of_slot(int slot, int asked) const {
  if (asked < 0)
    for (int i = 0; i < size() && asked < 0; ++i)
      if (hooks_.running(i)) asked = i;
  if (asked < 0) return -1;
  for (const std::string& line : lines_of(cli(asked, {"CLUSTER", "NODES"}))) {
    auto w = words_of(line);
    if (w.size() < 8 || w[2].find("master") == std::string::npos || w[2].find("fail") != std::string::npos) continue;
    for (std::size_t k = 8; k < w.size(); ++k) {
      if (w[k].front() == '[') continue;
      const auto dash = w[k].find('-');
      const int lo = std::stoi(w[k].substr(0, dash));
      const int hi = dash == std::string::npos ? lo : std::stoi(w[k].substr(dash + 1));
      if (slot >= lo && slot <= hi) {
        const auto colon = w[1].rfind(':', w[1].find('@')), at = w[1].find('@');
        return index_of_told(std::stoi(w[1].substr(colon + 1, at - colon - 1)));
      }
    }
  }
  return -1;
}

bool ClusterAdmin::is_master(int i) const { return cli(i, {"ROLE"}).rfind("master", 0) == 0; }

void ClusterAdmin::migrate_slot(int slot, int to, int stop_before) {
  const int from = master_of_slot(slot);
  if (from < 0 || from == to) throw std::logic_error("migrate_slot: bad source or target");
  const std::string s = std::to_string(slot);
  cli(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", id(from)});
  cli(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", id(to)});
  if (stop_before == 1) return;
  for (;;) {
    auto keys = lines_of(cli(from, {"CLUSTER", "GETKEYSINSLOT", s, "1000"}));
    if (keys.empty()) break;
    std::vector<std::string> args = {"MIGRATE", "127.0.0.1", std::to_string(node(to).port), "", "0", "5000", "KEYS"};
    args.insert(args.end(), keys.begin(), keys.end());
    const std::string out = cli(from, args);
    if (out != "OK" && out != "NOKEY") throw std::runtime_error("MIGRATE failed: " + out);
  }
  if (stop_before == 2) return;
  const std::string target = id(to);
  cli(to, {"CLUSTER", "SETSLOT", s, "NODE", target});
  cli(from, {"CLUSTER", "SETSLOT", s, "NODE", target});
  for (int i = 0; i < size(); ++i)
    if (i != to && i != from && hooks_.running(i) && is_master(i)) cli(i, {"CLUSTER", "SETSLOT", s, "NODE", target});
}

void ClusterAdmin::failover(int replica, const std::string& mode) {
  std::vector<std::string> args = {"CLUSTER", "FAILOVER"};
  if (!mode.empty()) args.push_back(mode);
  const std::string out = cli(replica, args);
  if (out != "OK") throw std::runtime_error("CLUSTER FAILOVER failed: " + out);
  wait_until(
      "cluster node " + std::to_string(replica) + " is master", milliseconds(30000), [&] { return is_master(replica); },
      hooks_);
  wait_ok();
}

bool ClusterAdmin::ok() const {
  int first = -1;
  for (int i = 0; i < size(); ++i) {
    if (!hooks_.running(i)) continue;
    if (cli(i, {"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) return false;
    if (first < 0) first = i;
    for (int slot : {0, 8000, 16383}) {
      const int m = master_of_slot(slot, i);
      if (m < 0 || !hooks_.running(m) || m != master_of_slot(slot, first)) return false;
    }
  }
  return first >= 0;
}

void ClusterAdmin::wait_ok(milliseconds limit) const {
  wait_until(
      "the cluster is ok", limit, [&] { return ok(); }, hooks_);
}

// ---- Sentinel -------------------------------------------------------------

SentinelAdmin::SentinelAdmin(std::vector<TopologyNode> data, std::vector<std::uint16_t> sentinels, std::string name,
                             TopologyHooks hooks)
    : data_(std::move(data)), sentinels_(std::move(sentinels)), name_(std::move(name)), hooks_(std::move(hooks)) {
  for (const TopologyNode& n : data_) data_conns_.push_back(admin(n.port));
  for (std::uint16_t p : sentinels_) sentinel_conns_.push_back(admin(p));
}

std::string SentinelAdmin::cli_sentinel(int k, const std::vector<std::string>& args) const {
  return sentinel_conns_.at(static_cast<std::size_t>(k))->cmd(args).text();
}

std::string SentinelAdmin::cli_data(int i, const std::vector<std::string>& args) const {
  return data_conns_.at(static_cast<std::size_t>(i))->cmd(args).text();
}

std::string SentinelAdmin::sentinel_config(const std::string& name, std::uint16_t port) {
  return "sentinel monitor " + name + " 127.0.0.1 " + std::to_string(port) + " 2\n" +
         "sentinel down-after-milliseconds " + name + " 1000\n" + "sentinel failover-timeout " + name + " 3000\n";
}

void SentinelAdmin::wait_formed() const {
  const std::string others = std::to_string(sentinels_.size() - 1);
  const std::string replicas = std::to_string(data_.size() - 1);
  wait_until(
      "the sentinels know each other and the replica", milliseconds(30000),
      [&] {
        for (std::size_t k = 0; k < sentinels_.size(); ++k) {
          const std::string m = cli_sentinel(static_cast<int>(k), {"SENTINEL", "MASTER", name_});
          if (field(m, "num-other-sentinels") != others || field(m, "num-slaves") != replicas) return false;
        }
        for (std::size_t i = 1; i < data_.size(); ++i)
          if (cli_data(static_cast<int>(i), {"INFO", "replication"}).find("master_link_status:up") == std::string::npos)
            return false;
        return true;
      },
      hooks_);
}

int SentinelAdmin::master_index() const {
  int agreed = -2;
  for (std::size_t k = 0; k < sentinels_.size(); ++k) {
    if (!hooks_.running(sentinel_hook_index(static_cast<int>(k)))) continue;
    const std::string addr = cli_sentinel(static_cast<int>(k), {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", name_});
    const std::string port = addr.substr(addr.find('\n') + 1);
    int found = -1;
    for (std::size_t i = 0; i < data_.size(); ++i)
      if (std::to_string(data_[i].told()) == port) found = static_cast<int>(i);
    if (agreed == -2) agreed = found;
    if (found != agreed) return -1;
  }
  return agreed < 0 ? -1 : agreed;
}

void SentinelAdmin::wait_master(int i, milliseconds limit) const {
  wait_until(
      "data node " + std::to_string(i) + " is master", limit,
      [&] { return master_index() == i && cli_data(i, {"ROLE"}).rfind("master", 0) == 0; }, hooks_);
}

void SentinelAdmin::failover() const {
  const int now = master_index();
  if (now < 0) throw std::logic_error("failover: the sentinels do not agree on a master");
  // Refused while a previous failover is still settling: asked again.
  wait_until(
      "a sentinel accepts SENTINEL FAILOVER", milliseconds(30000),
      [&] {
        return cli_sentinel(0, {"SENTINEL", "FAILOVER", name_}) == "OK";
      },
      hooks_);
  wait_master(1 - now);
}

}  // namespace dlock::tools

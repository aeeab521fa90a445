// ?nat=ANNOUNCED>REACHABLE on redis-cluster:// and redis-sentinel://: the
// servers announce nodes at their own addresses, which this client reaches
// only through a TCP proxy (as through NAT, a container's port map or a
// tunnel). Every command must go through the mapped address: the proxy's
// counters prove it, and cutting the proxy cuts the client.
#include <map>
#include <memory>

#include "integration/common.hpp"
#include "proxy.hpp"
#include "redis/cluster_map.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_sentinel.hpp"

namespace dlock::test {
namespace {

std::string lock_key(const std::string& name) { return "dlock:{" + name + "}"; }

// One proxy per server, one link each; the URL's nat entries send the
// announced address of each server to its proxy's link.
struct Proxies {
  std::vector<std::unique_ptr<torture::Proxy>> each;
  std::string nat;  // "nat=...&nat=..."

  void add(int port) {
    auto p = std::make_unique<torture::Proxy>("127.0.0.1", static_cast<std::uint16_t>(port));
    const std::uint16_t link = p->add_link("c");
    p->start();
    nat += std::string(nat.empty() ? "" : "&") + "nat=127.0.0.1:" + std::to_string(port) +
           "%3E127.0.0.1:" + std::to_string(link);
    each.push_back(std::move(p));
  }
  std::uint64_t bytes_up(int i) const { return each.at(static_cast<std::size_t>(i))->stats("c").bytes_up; }
};

LockOptions lease_of(milliseconds lease) {
  LockOptions o;
  o.lease = lease;
  return o;
}

TEST(RedisNat, EveryClusterCommandGoesThroughTheMappedAddress) {
  RedisCluster cluster(3, 0);
  Proxies proxies;
  for (int i = 0; i < cluster.size(); ++i) proxies.add(cluster.node(i).port());
  LogSink log;
  // The seed is dialled as written; the nodes the cluster announces (every
  // master, the seed too) through their proxies.
  Client client = Client::connect(cluster.url() + "?" + proxies.nat, quiet(log));
  std::map<int, std::string> name_on;  // master -> a name it serves
  for (int i = 0; name_on.size() < 3; ++i) {
    const std::string n = "nat" + std::to_string(i);
    name_on.emplace(cluster.master_of_key(lock_key(n)), n);
  }
  for (const auto& [m, name] : name_on) {
    const auto before = proxies.bytes_up(m);
    auto lease = client.try_acquire(name, lease_of(10s));
    ASSERT_TRUE(lease.ok()) << name << ": " << lease.status().to_string();
    EXPECT_GT(proxies.bytes_up(m), before) << "the acquire on master " << m << " went around its proxy";
    EXPECT_EQ(cluster.cli(m, {"EXISTS", lock_key(name)}), "1");
    EXPECT_TRUE(lease->release().ok());
  }
  // Cut master 0's proxy: its names are unreachable; the others' are not.
  proxies.each[0]->refuse("c", true);
  proxies.each[0]->reset("c");
  auto cut = client.acquire(name_on.at(0), 300ms, lease_of(10s));
  EXPECT_FALSE(cut.ok()) << "granted on master 0 with its only route cut";
  auto other = client.acquire(name_on.at(1), 300ms, lease_of(10s));
  EXPECT_TRUE(other.ok()) << other.status().to_string();
  proxies.each[0]->refuse("c", false);
  auto healed = client.acquire(name_on.at(0), 10s, lease_of(10s));
  EXPECT_TRUE(healed.ok()) << healed.status().to_string();
}

TEST(RedisNat, TheMasterTheSentinelsNameIsDialledThroughItsEntry) {
  RedisSentinelSet set;
  Proxies proxies;
  proxies.add(set.data(0).port());
  proxies.add(set.data(1).port());
  LogSink log;
  Client client = Client::connect(set.url() + "?" + proxies.nat, quiet(log));
  auto through = [&](int node, const std::string& name) {
    const auto before = proxies.bytes_up(node);
    auto lease = client.acquire(name, 10s, lease_of(10s));
    ASSERT_TRUE(lease.ok()) << lease.status().to_string();
    EXPECT_GT(proxies.bytes_up(node), before) << "data node " << node << " was reached around its proxy";
    EXPECT_EQ(SyncRedis(set.data(node).port()).integer({"EXISTS", lock_key(name)}), 1);
    EXPECT_TRUE(lease->release().ok());
  };
  through(0, "before");
  // The announced switch names the replica's own address: mapped too.
  set.failover();
  EXPECT_TRUE(eventually(
      [&] {
        auto lease = client.try_acquire("probe", lease_of(1s));
        return lease.ok() && SyncRedis(set.data(1).port()).integer({"EXISTS", lock_key("probe")}) == 1 &&
               lease->release().ok();
      },
      10s));
  through(1, "after");
}

}  // namespace
}  // namespace dlock::test

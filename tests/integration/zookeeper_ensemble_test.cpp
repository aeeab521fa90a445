// The ZooKeeper test ensemble itself: servers elect a leader, elect again
// when it dies, take a restarted server back, and leave nothing behind. The
// ZooKeeper backend's tests stand on this.
#include <signal.h>

#include <filesystem>

#include "integration/common.hpp"
#include "support/zookeeper_server.hpp"

namespace dlock::test {
namespace {

// As eventually(), but every 200 ms: each probe costs the JVMs a connection.
bool within(std::chrono::milliseconds limit, const std::function<bool()>& pred) {
  const auto end = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() >= end) return false;
    std::this_thread::sleep_for(200ms);
  }
  return true;
}

int count_mode(const ZooKeeperEnsemble& zk, const std::string& mode) {
  int n = 0;
  for (int i = 0; i < zk.size(); ++i) n += zk.mode(i) == mode ? 1 : 0;
  return n;
}

TEST(ZooKeeperEnsemble, ElectsOneLeaderAndAnotherWhenItDies) {
  if (!zookeeper_available()) GTEST_SKIP() << "ZooKeeper is not installed";
  ZooKeeperEnsemble zk;
  ASSERT_TRUE(within(30s, [&] { return count_mode(zk, "leader") == 1 && count_mode(zk, "follower") == 2; }));
  const int first = zk.leader();
  zk.kill(first);
  EXPECT_EQ(zk.mode(first), "");
  EXPECT_TRUE(within(30s, [&] { return zk.leader() >= 0; }));
  EXPECT_NE(zk.leader(), first);
  zk.start(first);
  EXPECT_TRUE(within(30s, [&] { return zk.mode(first) == "follower"; }));
}

TEST(ZooKeeperEnsemble, APausedServerIsSilentAndNothingStaysBehind) {
  if (!zookeeper_available()) GTEST_SKIP() << "ZooKeeper is not installed";
  std::vector<pid_t> pids;
  std::string dir;
  {
    ZooKeeperEnsemble zk;
    ASSERT_TRUE(within(30s, [&] { return count_mode(zk, "follower") == 2; }));
    const int follower = (zk.leader() + 1) % zk.size();
    zk.pause(follower);
    EXPECT_EQ(zk.mode(follower), "");
    zk.resume(follower);
    EXPECT_TRUE(within(30s, [&] { return zk.mode(follower) == "follower"; }));
    for (int i = 0; i < zk.size(); ++i) pids.push_back(zk.pid(i));
    dir = zk.dir();
  }
  for (pid_t p : pids) EXPECT_NE(::kill(p, 0), 0) << "server pid " << p << " still runs";
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(ZooKeeperEnsemble, OneServerRunsStandalone) {
  if (!zookeeper_available()) GTEST_SKIP() << "ZooKeeper is not installed";
  ZooKeeperEnsemble zk(1);
  EXPECT_EQ(zk.mode(0), "standalone");
  EXPECT_EQ(zk.hosts(), "127.0.0.1:" + std::to_string(zk.client_port(0)));
}

}  // namespace
}  // namespace dlock::test

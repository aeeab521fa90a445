// kazoo's Lock and dlock on one ZooKeeper path (?layout=kazoo): a mixed
// fleet of real kazoo and dlock processes (interop_fleet.hpp), and the
// layout's nodes as kazoo reads them. kazoo's names ("<uuid>__lock__<seq>",
// "__rlock__" for its ReadLock) and its order (the sequence after them;
// other names are not contenders) are those of kazoo/recipe/lock.py.
#include <regex>

#include "integration/interop_fleet.hpp"
#include "support/zk_probe.hpp"
#include "support/zookeeper_server.hpp"

namespace dlock::test {
namespace {

// kazoo's contender pattern for its Lock (its _contenders_re, for
// _EXCLUDE_NAMES = ["__lock__"]); its WriteLock adds "__rlock__".
bool kazoo_lock_contender(const std::string& child) {
  static const std::regex re("(?:__lock__)(-?\\d{10})$");
  return std::regex_search(child, re);
}

TEST(ZooKeeperInterop, DlockAndKazooLockShareOnePathBothWays) {
  if (!zookeeper_available()) GTEST_SKIP() << "ZooKeeper is not installed";
  auto peer = interop::python_peer("kazoo", "kazoo.client", "kazoo_lock_worker.py");
  if (!peer) GTEST_SKIP() << "python3 with kazoo (Debian's python3-kazoo) is not installed";
  ZooKeeperEnsemble zk(1);
  RedisServer log;  // the fleet's log and counter
  interop::Fleet f;
  f.peer = *peer;
  // Sessions of 2 s on both sides: a SIGKILLed holder's node goes then.
  f.dlock_url = url(zk.hosts(), "layout=kazoo&session_timeout=2s");
  f.name = "interop-job";
  f.log_port = log.port();
  f.woken_within = 650ms;  // a third of the session: each side watches the node ahead
  // HOSTS PATH LOG_PORT LOG COUNTER SECONDS SESSION_S HOLD_MS
  f.peer_args = {zk.hosts(),
                 "/dlock/interop-job",
                 std::to_string(log.port()),
                 interop::kLog,
                 interop::kCounter,
                 std::to_string(f.seconds),
                 "2",
                 "20"};
  interop::run_mixed_fleet(f);
}

// A kazoo Lock's node (made as kazoo makes it: "<uuid hex>__lock__", the
// identifier as data) holds against dlock in either layout, and is shown as
// a peer's; dlock's node in layout=kazoo is one kazoo counts, with the
// holder as its identifier.
TEST(ZooKeeperInterop, AKazooHoldIsBusyAndNamedAndDlocksNodeIsAKazooContender) {
  if (!zookeeper_available()) GTEST_SKIP() << "ZooKeeper is not installed";
  ZooKeeperEnsemble zk(1);
  ZkProbe probe(zk.hosts());
  ASSERT_TRUE(probe.create_persistent("/dlock"));
  ASSERT_TRUE(probe.create_persistent("/dlock/job"));
  const std::string kazoo_node =
      probe.create_sequential("/dlock/job/6d1f0c3a9b8e4f27a1c2d3e4f5a6b7c8__lock__", "batch-7");
  ASSERT_FALSE(kazoo_node.empty());

  for (const char* params : {"", "layout=kazoo"}) {
    SCOPED_TRACE(std::string("layout: ") + (*params ? params : "default"));
    auto client = Client::connect(url(zk.hosts(), params), silent());
    auto busy = client.acquire("job", 0ms);
    ASSERT_FALSE(busy.ok());
    EXPECT_EQ(busy.status().code(), Errc::busy);
    auto info = client.inspect("job");
    ASSERT_TRUE(info.ok()) << info.status().to_string();
    EXPECT_TRUE(info->held);
    EXPECT_NE(info->holder.find("a peer library"), std::string::npos) << info->holder;
    EXPECT_NE(info->holder.find("batch-7"), std::string::npos) << info->holder;
  }

  // kazoo releases: dlock's waiter is woken by its watch and granted.
  auto client = Client::connect(url(zk.hosts(), "layout=kazoo"), silent());
  LockOptions lo;
  lo.holder = "report-job";
  std::thread peer([&] {
    std::this_thread::sleep_for(100ms);
    probe.remove(kazoo_node);
  });
  auto lk = client.acquire("job", 5s, lo);
  peer.join();
  ASSERT_TRUE(lk.ok()) << lk.status().to_string();
  EXPECT_GT(lk->fence(), 0u);
  const auto children = probe.children("/dlock/job");
  ASSERT_EQ(children.size(), 1u);
  EXPECT_TRUE(kazoo_lock_contender(children.front())) << children.front();
  EXPECT_TRUE(children.front().starts_with("_c_")) << children.front();
  EXPECT_EQ(probe.data("/dlock/job/" + children.front()).find("report-job"), 0u)
      << "kazoo's contenders() shows the node's data as the identifier";
  // A kazoo contender made now queues behind dlock's node.
  const std::string behind = probe.create_sequential("/dlock/job/00112233445566778899aabbccddeeff__lock__");
  ASSERT_FALSE(behind.empty());
  auto line = probe.children("/dlock/job");
  std::sort(line.begin(), line.end(), [](const std::string& a, const std::string& b) {
    return a.substr(a.size() - 10) < b.substr(b.size() - 10);
  });
  EXPECT_EQ(line.front(), children.front()) << "dlock's node is first in kazoo's order";
  probe.remove(behind);
  ASSERT_TRUE(lk->release().ok());
  EXPECT_TRUE(probe.children("/dlock/job").empty());
}

// kazoo's ReadLock and dlock's readers share; a writer of either waits for
// them. Counted locks are refused in layout=kazoo, naming why.
TEST(ZooKeeperInterop, KazooReadersShareWithDlocksAndSemaphoresAreRefused) {
  if (!zookeeper_available()) GTEST_SKIP() << "ZooKeeper is not installed";
  ZooKeeperEnsemble zk(1);
  ZkProbe probe(zk.hosts());
  ASSERT_TRUE(probe.create_persistent("/dlock"));
  ASSERT_TRUE(probe.create_persistent("/dlock/rw"));
  const std::string reader = probe.create_sequential("/dlock/rw/aaaabbbbccccddddeeeeffff00001111__rlock__", "r1");
  ASSERT_FALSE(reader.empty());
  auto client = Client::connect(url(zk.hosts(), "layout=kazoo"), silent());
  SharedMutex rw(client, "rw");
  EXPECT_TRUE(rw.try_lock_shared()) << "a reader beside kazoo's reader";
  const auto nodes = probe.children("/dlock/rw");
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(std::count_if(nodes.begin(), nodes.end(),
                          [](const std::string& c) { return c.find("__rlock__") != std::string::npos; }),
            2)
      << "dlock's reader is a kazoo __rlock__ node";
  rw.unlock_shared();
  auto writer = client.acquire("rw", 0ms);
  ASSERT_FALSE(writer.ok()) << "kazoo's reader still reads";
  EXPECT_EQ(writer.status().code(), Errc::busy);

  Semaphore sem(client, "permits", 2);
  try {
    sem.acquire();
    ADD_FAILURE() << "a counted lock in layout=kazoo";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("layout=kazoo"), std::string::npos) << e.what();
  }
  auto bad = Client::try_connect(url(zk.hosts(), "layout=redisson"), silent());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::invalid_argument);
  EXPECT_NE(bad.status().message().find("kazoo"), std::string::npos) << bad.status().to_string();
}

// An election shared with kazoo's: dlock's candidate shows in kazoo's own
// Election.contenders(), run by the real library.
TEST(ZooKeeperInterop, ADlockLeaderIsAContenderOfKazoosElection) {
  if (!zookeeper_available()) GTEST_SKIP() << "ZooKeeper is not installed";
  auto peer = interop::python_peer("kazoo", "kazoo.client", "kazoo_lock_worker.py");
  if (!peer) GTEST_SKIP() << "python3 with kazoo (Debian's python3-kazoo) is not installed";
  ZooKeeperEnsemble zk(1);
  auto client = Client::connect(url(zk.hosts(), "layout=kazoo"), silent());
  Election election(client, "leader", "node-a");
  auto lead = election.campaign(5s);
  ASSERT_TRUE(lead.ok()) << lead.status().to_string();
  const auto out = tools::run({peer->command.front(), "-c",
                               "import sys\n"
                               "from kazoo.client import KazooClient\n"
                               "zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=15)\n"
                               "print(zk.Election('/dlock/leader').contenders())\n"
                               "zk.stop()\n",
                               zk.hosts()},
                              30s);
  EXPECT_EQ(out.exit_code, 0) << out.err;
  EXPECT_NE(out.out.find("'node-a'"), std::string::npos) << out.out;
}

}  // namespace
}  // namespace dlock::test

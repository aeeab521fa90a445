// Shared and counted locks, holder info and holder-change watches on the
// ZooKeeper backend, against real ensembles started per test, for what the
// decision table (tests/decisions/locks.table) cannot say: a released
// permit waking the next waiter, a waiter for many permits, contention,
// the error naming both counts, a dead session freeing its holds, inspect's
// holder info, and the attempt-0 watch telling every change to the queue.
#include <signal.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <optional>

#include "client_core.hpp"
#include "integration/common.hpp"
#include "support/status_matchers.hpp"
#include "support/zk_probe.hpp"
#include "support/zookeeper_server.hpp"
#include "zookeeper/factory.hpp"
#include "zookeeper/zk_backend.hpp"

namespace dlock::test {
namespace {

#define REQUIRE_ZOOKEEPER() \
  if (!zookeeper_available()) GTEST_SKIP() << "ZooKeeper is not installed"

using detail::LockMode;
using detail::Shape;

// A client whose core takes shared and counted holds before the public
// classes offer them.
struct Node {
  explicit Node(const std::string& u) {
    auto c = detail::ClientCore::connect(u, silent());
    if (!c.ok()) throw std::runtime_error(c.status().to_string());
    core = std::move(c.value());
    client.emplace(detail::ClientFactory::make(core));
  }
  Result<Lease> take(const std::string& name, milliseconds wait, Shape shape, LockOptions o = {}) {
    const bool fresh = o.owner.empty();
    if (fresh) o.owner = Client::random_owner();
    return detail::blocking_acquire(*core, name, wait, o, fresh, shape);
  }
  Result<Lease> read(const std::string& name, milliseconds wait, LockOptions o = {}) {
    return take(name, wait, Shape{LockMode::shared, 0}, std::move(o));
  }
  Result<Lease> permit(const std::string& name, unsigned permits, milliseconds wait, LockOptions o = {}) {
    return take(name, wait, Shape{LockMode::shared, permits}, std::move(o));
  }
  Result<Lease> write(const std::string& name, milliseconds wait, LockOptions o = {}) {
    return take(name, wait, Shape{}, std::move(o));
  }
  std::shared_ptr<detail::ClientCore> core;
  std::optional<Client> client;
};

template <class T>
bool ready(std::future<T>& f, milliseconds within = 0ms) {
  return f.wait_for(within) == std::future_status::ready;
}

TEST(ZooKeeperLines, ThreePermitsNeverAdmitAFourthAndAReleasedPermitGoesToTheNextWaiter) {
  REQUIRE_ZOOKEEPER();
  ZooKeeperEnsemble zk(1);
  constexpr int kClients = 6;
  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < kClients; ++i) nodes.push_back(std::make_unique<Node>(url(zk.hosts())));
  std::vector<Lease> held;
  for (int i = 0; i < 3; ++i) {
    auto l = nodes[i]->permit("sem", 3, 0ms);
    ASSERT_THAT(l, IsOk()) << "permit " << i;
    held.push_back(std::move(*l));
  }
  EXPECT_THAT(nodes[3]->permit("sem", 3, 0ms), StatusIs(Errc::busy)) << "no fourth holder";
  ZkProbe probe(zk.hosts());
  auto fourth = std::async(std::launch::async, [&] { return nodes[3]->permit("sem", 3, 20s); });
  ASSERT_TRUE(eventually([&] { return probe.children("/dlock/sem").size() == 4; }, 5s));
  auto fifth = std::async(std::launch::async, [&] { return nodes[4]->permit("sem", 3, 20s); });
  ASSERT_TRUE(eventually([&] { return probe.children("/dlock/sem").size() == 5; }, 5s));
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(ready(fourth));
  EXPECT_FALSE(ready(fifth));
  // The middle holder goes first: the head of the line gets its permit.
  ASSERT_THAT(held[1].release(), IsOk());
  ASSERT_TRUE(ready(fourth, 10s)) << "the released permit went to the next waiter";
  auto f4 = fourth.get();
  ASSERT_THAT(f4, IsOk());
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(ready(fifth)) << "three hold again: the fifth still waits";
  auto info = nodes[5]->client->inspect("sem");
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->holders, 3u);
  EXPECT_TRUE(info->shared);
  EXPECT_EQ(info->waiters, 1u);
  ASSERT_THAT(held[2].release(), IsOk());
  ASSERT_TRUE(ready(fifth, 10s));
  auto f5 = fifth.get();
  ASSERT_THAT(f5, IsOk());
  EXPECT_THAT(nodes[5]->permit("sem", 3, 0ms), StatusIs(Errc::busy));
  for (Lease* l : {&held[0], &*f4, &*f5}) ASSERT_THAT(l->release(), IsOk());
}

TEST(ZooKeeperLines, AWaiterForManyPermitsWatchesTheQueueAndIsLetIn) {
  REQUIRE_ZOOKEEPER();
  ZooKeeperEnsemble zk(1);
  constexpr unsigned kPermits = 20;  // more than a waiter watches nodes for
  Node a(url(zk.hosts())), b(url(zk.hosts()));
  std::vector<Lease> held;
  for (unsigned i = 0; i < kPermits; ++i) {
    auto l = a.permit("wide", kPermits, 0ms);
    ASSERT_THAT(l, IsOk()) << "permit " << i;
    held.push_back(std::move(*l));
  }
  EXPECT_THAT(b.permit("wide", kPermits, 0ms), StatusIs(Errc::busy));
  ZkProbe probe(zk.hosts());
  auto waiter = std::async(std::launch::async, [&] { return b.permit("wide", kPermits, 20s); });
  ASSERT_TRUE(eventually([&] { return probe.children("/dlock/wide").size() == kPermits + 1; }, 5s));
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(ready(waiter));
  ASSERT_THAT(held[7].release(), IsOk());
  ASSERT_TRUE(ready(waiter, 10s));
  auto got = waiter.get();
  ASSERT_THAT(got, IsOk());
  ASSERT_THAT(got->release(), IsOk());
}

TEST(ZooKeeperLines, ConcurrentPermitHoldersNeverExceedTheCount) {
  REQUIRE_ZOOKEEPER();
  ZooKeeperEnsemble zk(1);
  constexpr int kClients = 6;
  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < kClients; ++i) nodes.push_back(std::make_unique<Node>(url(zk.hosts())));
  std::atomic<int> inside{0}, most{0}, grants{0}, failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 5; ++k) {
        auto l = nodes[i]->permit("many", 3, 20s);
        if (!l.ok()) {
          ++failures;
          continue;
        }
        const int now = ++inside;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(20ms);
        --inside;
        ++grants;
        if (!l->release().ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(grants.load(), kClients * 5);
  EXPECT_LE(most.load(), 3);
  EXPECT_GE(most.load(), 2) << "permits were shared";
}

TEST(ZooKeeperLines, DisagreeingPermitsAreRefusedNamingBothCounts) {
  REQUIRE_ZOOKEEPER();
  ZooKeeperEnsemble zk(1);
  Node a(url(zk.hosts())), b(url(zk.hosts()));
  auto held = a.permit("p", 3, 0ms);
  ASSERT_THAT(held, IsOk());
  auto bad = b.permit("p", 2, 0ms);
  ASSERT_THAT(bad, StatusIs(Errc::invalid_argument));
  EXPECT_NE(bad.status().message().find('2'), std::string::npos) << bad.status().to_string();
  EXPECT_NE(bad.status().message().find('3'), std::string::npos) << bad.status().to_string();
  EXPECT_THAT(b.read("p", 2s), StatusIs(Errc::invalid_argument)) << "a read lock counts no permits";
  // Waiting: refused too, and nothing is left behind.
  EXPECT_THAT(b.permit("p", 5, 2s), StatusIs(Errc::invalid_argument));
  ZkProbe probe(zk.hosts());
  EXPECT_TRUE(eventually([&] { return probe.children("/dlock/p").size() == 1; }, 5s));
  auto agree = b.permit("p", 3, 0ms);
  EXPECT_THAT(agree, IsOk());
}

TEST(ZooKeeperLines, ADeadSessionFreesItsPermitsAndReadHolds) {
  REQUIRE_ZOOKEEPER();
  ZooKeeperEnsemble zk(1);
  const std::string u = url(zk.hosts(), "session_timeout=2s");
  const pid_t child = fork_child([&] {
    Node n(u);
    auto p1 = n.permit("dead-sem", 2, 5s);
    auto p2 = n.permit("dead-sem", 2, 5s);
    auto r = n.read("dead-rw", 5s);
    if (!p1.ok() || !p2.ok() || !r.ok()) return 1;
    std::this_thread::sleep_for(60s);
    return 0;
  });
  ZkProbe probe(zk.hosts());
  ASSERT_TRUE(eventually(
      [&] { return probe.children("/dlock/dead-sem").size() == 2 && probe.children("/dlock/dead-rw").size() == 1; },
      10s));
  Node other(u);
  EXPECT_THAT(other.permit("dead-sem", 2, 0ms), StatusIs(Errc::busy));
  EXPECT_THAT(other.write("dead-rw", 0ms), StatusIs(Errc::busy));
  ::kill(child, SIGKILL);
  wait_exit(child, 5s);
  auto permit = other.permit("dead-sem", 2, 20s);
  ASSERT_THAT(permit, IsOk());
  auto writer = other.write("dead-rw", 20s);
  ASSERT_THAT(writer, IsOk());
  auto second = other.permit("dead-sem", 2, 0ms);
  EXPECT_THAT(second, IsOk()) << "both of the dead session's permits are free";
}

TEST(ZooKeeperLines, InspectShowsTheHoldersInfoAndCounts) {
  REQUIRE_ZOOKEEPER();
  ZooKeeperEnsemble zk(1);
  Node a(url(zk.hosts())), b(url(zk.hosts())), w(url(zk.hosts()));
  LockOptions who;
  who.holder = "candidate-7";
  auto first = a.read("info", 0ms, who);
  ASSERT_THAT(first, IsOk());
  LockOptions other;
  other.holder = "candidate-8";
  auto second = b.read("info", 0ms, other);
  ASSERT_THAT(second, IsOk());
  ZkProbe probe(zk.hosts());
  auto writer = std::async(std::launch::async, [&] { return w.write("info", 20s); });
  ASSERT_TRUE(eventually([&] { return probe.children("/dlock/info").size() == 3; }, 5s));
  auto info = a.client->inspect("info");
  ASSERT_THAT(info, IsOk());
  EXPECT_TRUE(info->held);
  EXPECT_EQ(info->holder, "candidate-7") << "the first holder speaks for the lock";
  EXPECT_EQ(info->holders, 2u);
  EXPECT_TRUE(info->shared);
  EXPECT_EQ(info->waiters, 1u);
  EXPECT_EQ(info->fence, first->fence());
  ASSERT_THAT(first->release(), IsOk());
  info = a.client->inspect("info");
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->holder, "candidate-8");
  EXPECT_EQ(info->holders, 1u);
  ASSERT_THAT(second->release(), IsOk());
  auto got = writer.get();
  ASSERT_THAT(got, IsOk());
  info = a.client->inspect("info");
  ASSERT_THAT(info, IsOk());
  EXPECT_FALSE(info->shared);
  EXPECT_EQ(info->holders, 1u);
  // The writer asked for no holder text: its description.
  EXPECT_NE(info->holder.find("[" + std::to_string(::getpid()) + "]@"), std::string::npos) << info->holder;
  EXPECT_FALSE(info->held_for.has_value()) << "ZooKeeper cannot tell since when";
  EXPECT_EQ(info->waiters, 0u);
  ASSERT_THAT(got->release(), IsOk());
}

// The backend alone, on a loop of the test's own: an observer's watch on
// a lock's queue.
struct Observer {
  explicit Observer(const std::string& u) : work(boost::asio::make_work_guard(io)) {
    auto config = zookeeper::parse_zk_url(u);
    if (!config.ok()) throw std::runtime_error(config.status().to_string());
    backend = zookeeper::make_zk_backend(io, std::move(config.value()));
    detail::BackendEvents events;
    events.released = [this](const detail::WatchKey& key) {
      if (key.attempt == 0) {
        std::lock_guard lk(mu);
        told.push_back(key.name);
      }
    };
    backend->set_events(std::move(events));
    thread = std::thread([this] { io.run(); });
  }
  ~Observer() {
    std::promise<void> closed;
    boost::asio::post(io, [&] {
      backend->close();
      closed.set_value();
    });
    closed.get_future().wait();
    work.reset();
    thread.join();
  }
  Status on_loop(std::function<void(std::function<void(Status)>)> call) {
    auto p = std::make_shared<std::promise<Status>>();
    auto f = p->get_future();
    boost::asio::post(io, [call = std::move(call), p] { call([p](Status s) { p->set_value(std::move(s)); }); });
    if (f.wait_for(10s) != std::future_status::ready) return {Errc::timeout, "no answer"};
    return f.get();
  }
  std::size_t count(const std::string& name) {
    std::lock_guard lk(mu);
    return static_cast<std::size_t>(std::count(told.begin(), told.end(), name));
  }
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work;
  std::unique_ptr<detail::Backend> backend;
  std::thread thread;
  std::mutex mu;
  std::vector<std::string> told;
};

TEST(ZooKeeperLines, TheAttemptZeroWatchTellsEveryChangeOfHolder) {
  REQUIRE_ZOOKEEPER();
  ZooKeeperEnsemble zk(1);
  Observer obs(url(zk.hosts()));
  ASSERT_THAT(obs.on_loop([&](auto done) { obs.backend->start(std::move(done)); }), IsOk());
  // Watched before the lock's node exists: its creation is told too.
  ASSERT_THAT(obs.on_loop([&](auto done) { obs.backend->observe("leader", std::move(done)); }), IsOk());
  Client c1 = Client::connect(url(zk.hosts()), silent());
  Client c2 = Client::connect(url(zk.hosts()), silent());
  LockOptions one;
  one.holder = "one";
  auto first = c1.acquire("leader", 0ms, one);
  ASSERT_THAT(first, IsOk());
  ASSERT_TRUE(eventually([&] { return obs.count("leader") >= 1; }, 5s)) << "the first leader is told";
  LockOptions two;
  two.holder = "two";
  auto next = std::async(std::launch::async, [&] { return c2.acquire("leader", 20s, two); });
  ZkProbe probe(zk.hosts());
  ASSERT_TRUE(eventually([&] { return probe.children("/dlock/leader").size() == 2; }, 5s));
  std::this_thread::sleep_for(200ms);
  const std::size_t before = obs.count("leader");
  ASSERT_THAT(first->release(), IsOk());
  ASSERT_TRUE(eventually([&] { return obs.count("leader") > before; }, 5s)) << "the change of leader is told";
  auto second = next.get();
  ASSERT_THAT(second, IsOk());
  auto info = c1.inspect("leader");
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->holder, "two");
  // Re-armed: the next change is told as well.
  const std::size_t again = obs.count("leader");
  ASSERT_THAT(second->release(), IsOk());
  ASSERT_TRUE(eventually([&] { return obs.count("leader") > again; }, 5s));
  // Once unobserved, nothing more is told.
  ASSERT_THAT(obs.on_loop([&](auto done) {
    obs.backend->unobserve("leader");
    done(Status());
  }),
              IsOk());
  std::this_thread::sleep_for(100ms);
  const std::size_t after = obs.count("leader");
  auto third = c1.acquire("leader", 0ms);
  ASSERT_THAT(third, IsOk());
  ASSERT_THAT(third->release(), IsOk());
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(obs.count("leader"), after);
}

}  // namespace
}  // namespace dlock::test

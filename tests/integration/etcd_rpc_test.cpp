// The etcd client layer (src/etcd/etcd_rpc) against a real 3-member etcd
// cluster the test starts, and beside etcd's own lock (`etcdctl lock`):
// the keys, revisions and leases the etcd backend is built on.
#include "etcd/etcd_rpc.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "etcd/rpc_impl.hpp"
#include "support/etcd_cluster.hpp"
#include "support/process.hpp"
#include "support/redis_server.hpp"

namespace dlock::etcd {
namespace {

using namespace std::chrono_literals;

Clock::time_point in(std::chrono::milliseconds d) { return Clock::now() + d; }

EtcdConfig config(std::vector<std::string> endpoints, std::string user = {}, std::string password = {}) {
  EtcdConfig c;
  c.endpoints = std::move(endpoints);
  c.user = std::move(user);
  c.password = std::move(password);
  return c;
}

std::string hex(std::int64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
  return buf;
}

// A member's own timeouts come as Unknown with Go's or etcd's text: no
// answer (retried; a write's outcome unknown), never a server error that
// ends a wait (seen once under load: a 35 s wait ended after 11.5 s).
TEST(EtcdStatus, AMembersOwnTimeoutIsNoAnswerNotAServerError) {
  for (const char* text : {"context deadline exceeded", "context canceled", "etcdserver: request timed out",
                           "etcdserver: leader changed", "etcdserver: no leader"}) {
    const grpc::Status s(grpc::StatusCode::UNKNOWN, text);
    EXPECT_EQ(status_of(s, false).code(), Errc::unavailable) << text;
    EXPECT_EQ(status_of(s, true).code(), Errc::outcome_unknown) << text;
  }
  EXPECT_EQ(status_of(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "etcdserver: too many requests"), true).code(),
            Errc::unavailable);
  EXPECT_EQ(status_of(grpc::Status(grpc::StatusCode::UNKNOWN, "etcdserver: something else"), false).code(),
            Errc::server_error);
}

class EtcdRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::etcd_available()) GTEST_SKIP() << "etcd is not installed";
    cluster = std::make_unique<test::EtcdCluster>(3);
    auto c = EtcdRpc::connect(config(cluster->endpoints()), in(10s));
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    rpc = std::move(*c);
  }

  std::unique_ptr<test::EtcdCluster> cluster;
  std::unique_ptr<EtcdRpc> rpc;
};

TEST_F(EtcdRpcTest, PutRangeAndEraseOnAThreeMemberCluster) {
  auto st = rpc->status(in(5s));
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_NE(st->leader, 0u) << "the cluster has a leader";
  auto rev = rpc->put("k", "v1", 0, in(5s));
  ASSERT_TRUE(rev.ok()) << rev.status().to_string();
  auto got = rpc->range("k", "", in(5s));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->kvs.size(), 1u);
  EXPECT_EQ(got->kvs[0].value, "v1");
  EXPECT_EQ(got->kvs[0].create_revision, *rev);
  EXPECT_GE(got->revision, *rev);
  auto rev2 = rpc->put("k", "v2", 0, in(5s));
  ASSERT_TRUE(rev2.ok());
  EXPECT_GT(*rev2, *rev) << "revisions grow with every write";
  got = rpc->range("k", "", in(5s));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->kvs[0].create_revision, *rev) << "a key keeps its create revision across puts";
  auto gone = rpc->erase("k", in(5s));
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(*gone, 1);
  got = rpc->range("k", "", in(5s));
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->kvs.empty());
}

TEST_F(EtcdRpcTest, AKeyUnderALeaseGoesWhenTheLeaseIsRevoked) {
  auto lease = rpc->lease_grant(30, in(5s));
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  ASSERT_TRUE(rpc->put("leased", "x", *lease, in(5s)).ok());
  auto ttl = rpc->lease_time_to_live(*lease, in(5s));
  ASSERT_TRUE(ttl.ok());
  EXPECT_GT(*ttl, 0);
  auto got = rpc->range("leased", "", in(5s));
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->kvs.size(), 1u);
  EXPECT_EQ(got->kvs[0].lease, *lease);
  ASSERT_TRUE(rpc->lease_revoke(*lease, in(5s)).ok());
  got = rpc->range("leased", "", in(5s));
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->kvs.empty()) << "revoking a lease deletes its keys";
  ttl = rpc->lease_time_to_live(*lease, in(5s));
  ASSERT_TRUE(ttl.ok());
  EXPECT_EQ(*ttl, -1);
  EXPECT_EQ(rpc->put("leased", "x", *lease, in(5s)).code(), Errc::not_held) << "a put under a lease that is gone";
}

TEST_F(EtcdRpcTest, CreateIfAbsentKeepsThePlaceAndFindsTheWaiterJustBefore) {
  auto a = rpc->create("line/a", "", 0, in(5s));
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_TRUE(a->created);
  auto again = rpc->create("line/a", "other", 0, in(5s));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->kv.create_revision, a->kv.create_revision) << "the first one keeps its place";
  EXPECT_EQ(again->kv.value, "");
  auto b = rpc->create("line/b", "", 0, in(5s));
  auto c = rpc->create("line/c", "", 0, in(5s));
  ASSERT_TRUE(b.ok() && c.ok());
  auto before_c = rpc->last_created_before("line/", c->kv.create_revision - 1, in(5s));
  ASSERT_TRUE(before_c.ok());
  ASSERT_EQ(before_c->kvs.size(), 1u);
  EXPECT_EQ(before_c->kvs[0].key, "line/b");
  auto before_a = rpc->last_created_before("line/", a->kv.create_revision - 1, in(5s));
  ASSERT_TRUE(before_a.ok());
  EXPECT_TRUE(before_a->kvs.empty()) << "the first in line has nobody before it";
  EXPECT_EQ(prefix_end("line/"), "line0");
}

// etcd's own lock, from the command line: its key is NAME/<its lease in
// hex>, under that lease, and a later waiter's key is created after it.
// The etcd backend keeps exactly this layout, so that the two exclude
// each other.
TEST_F(EtcdRpcTest, EtcdctlLockHoldsNameSlashItsLeaseInHexUnderThatLease) {
  auto holder = test::spawn({"etcdctl", "--endpoints=" + cluster->endpoint_list(), "lock", "job", "--", "sleep", "30"},
                            {{"ETCDCTL_API", "3"}}, cluster->dir() + "/etcdctl-lock.out");
  std::vector<KeyValue> held;
  for (int i = 0; i < 200 && held.empty(); ++i) {
    auto got = rpc->range("job/", prefix_end("job/"), in(5s));
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    held = got->kvs;
    if (held.empty()) std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(held.size(), 1u) << "etcdctl lock took the lock";
  EXPECT_NE(held[0].lease, 0);
  EXPECT_EQ(held[0].key, "job/" + hex(held[0].lease));
  auto ttl = rpc->lease_time_to_live(held[0].lease, in(5s));
  ASSERT_TRUE(ttl.ok());
  EXPECT_GT(*ttl, 0) << "etcdctl keeps its lease alive";

  auto mine = rpc->lease_grant(30, in(5s));
  ASSERT_TRUE(mine.ok());
  auto waiting = rpc->create("job/" + hex(*mine), "", *mine, in(5s));
  ASSERT_TRUE(waiting.ok());
  EXPECT_TRUE(waiting->created);
  EXPECT_GT(waiting->kv.create_revision, held[0].create_revision) << "behind etcdctl in line";
  auto before = rpc->last_created_before("job/", waiting->kv.create_revision - 1, in(5s));
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(before->kvs.size(), 1u);
  EXPECT_EQ(before->kvs[0].key, held[0].key) << "the waiter just before this one is etcdctl's";

  // The holder dies; its key stays until its lease ends, here revoked as
  // an operator would, and then the next in line holds.
  ::kill(-holder.pid, SIGKILL);  // its process group: etcdctl and the command it runs
  tools::kill_child(holder);
  auto still = rpc->range(held[0].key, "", in(5s));
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->kvs.size(), 1u) << "a dead holder's key lives as long as its lease";
  ASSERT_TRUE(rpc->lease_revoke(held[0].lease, in(5s)).ok());
  auto gone = rpc->range(held[0].key, "", in(5s));
  ASSERT_TRUE(gone.ok());
  EXPECT_TRUE(gone->kvs.empty());
  before = rpc->last_created_before("job/", waiting->kv.create_revision - 1, in(5s));
  ASSERT_TRUE(before.ok());
  EXPECT_TRUE(before->kvs.empty()) << "nobody before this waiter now: it holds";
  ASSERT_TRUE(rpc->lease_revoke(*mine, in(5s)).ok());
}

TEST_F(EtcdRpcTest, AuthenticationWithTheRightPasswordWorksAndAWrongOneIsAuthFailed) {
  ASSERT_EQ(cluster->etcdctl({"user", "add", "root", "--new-user-password=s3cret"}).exit_code, 0);
  ASSERT_EQ(cluster->etcdctl({"auth", "enable"}).exit_code, 0);
  auto wrong = EtcdRpc::connect(config(cluster->endpoints(), "root", "nope"), in(10s));
  EXPECT_EQ(wrong.code(), Errc::auth_failed) << wrong.status().to_string();
  EXPECT_EQ(wrong.status().message().find("nope"), std::string::npos) << "the password is never in a message";
  auto right = EtcdRpc::connect(config(cluster->endpoints(), "root", "s3cret"), in(10s));
  ASSERT_TRUE(right.ok()) << right.status().to_string();
  EXPECT_TRUE((*right)->put("authed", "1", 0, in(5s)).ok());
  EXPECT_EQ(rpc->put("anonymous", "1", 0, in(5s)).code(), Errc::auth_failed) << "no token: refused";
}

TEST(EtcdRpc, AClusterThatIsNotThereIsUnavailableByTheDeadline) {
  const auto start = Clock::now();
  auto c = EtcdRpc::connect(config({"127.0.0.1:" + std::to_string(test::free_port())}), in(500ms));
  EXPECT_EQ(c.code(), Errc::unavailable) << c.status().to_string();
  EXPECT_LT(Clock::now() - start, 5s) << "bounded by the deadline, not gRPC's own backoff";
  EXPECT_EQ(EtcdRpc::connect(config({}), in(500ms)).code(), Errc::invalid_argument);
}

}  // namespace
}  // namespace dlock::etcd

#include <gtest/gtest.h>

#include "redis/url.hpp"

namespace dlock::detail {
namespace {

TEST(RedlockUrl, NodesInOrderWithDefaults) {
  auto nodes = parse_redlock_url("redlock://a:7001,b,[::1]:7003").value();
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].host, "a");
  EXPECT_EQ(nodes[0].port, 7001);
  EXPECT_EQ(nodes[1].host, "b");
  EXPECT_EQ(nodes[1].port, 6379);
  EXPECT_EQ(nodes[2].host, "::1");
  EXPECT_EQ(nodes[2].port, 7003);
  for (const auto& n : nodes) {
    EXPECT_FALSE(n.tls);
    EXPECT_EQ(n.db, 0);
    EXPECT_TRUE(n.password.empty());
  }
}

TEST(RedlockUrl, CredentialsDbAndTlsApplyToEveryNode) {
  auto nodes = parse_redlock_url("redlock+tls://alice:p%2Cw@h1:1,h2:2,h3:3,h4:4,h5:5/2?cacert=/ca.pem").value();
  ASSERT_EQ(nodes.size(), 5u);
  for (const auto& n : nodes) {
    EXPECT_TRUE(n.tls);
    EXPECT_EQ(n.username, "alice");
    EXPECT_EQ(n.password, "p,w");
    EXPECT_EQ(n.db, 2);
    EXPECT_EQ(n.ca_file, "/ca.pem");
  }
  EXPECT_EQ(nodes[4].host, "h5");
  EXPECT_EQ(nodes[4].port, 5);
}

TEST(RedlockUrl, DetectsScheme) {
  EXPECT_TRUE(is_redlock_url("redlock://a,b,c"));
  EXPECT_TRUE(is_redlock_url("redlock+tls://a,b,c"));
  EXPECT_FALSE(is_redlock_url("redis://a"));
  EXPECT_FALSE(is_redlock_url("rediss://a"));
}

void expect_bad(const char* url, const char* needle) {
  auto r = parse_redlock_url(url);
  ASSERT_FALSE(r.ok()) << url;
  EXPECT_EQ(r.code(), Errc::invalid_argument) << url;
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << url << ": " << r.status().message();
}

TEST(RedlockUrl, RejectsWrongNodeCounts) {
  expect_bad("redlock://a:1,b:2", "at least 3");
  expect_bad("redlock://a:1", "at least 3");
  expect_bad("redlock://a:1,b:2,c:3,d:4", "odd number");
}

TEST(RedlockUrl, RejectsDuplicates) {
  expect_bad("redlock://a:1,b:2,A:1", "same");
  expect_bad("redlock://a,b:2,a:6379", "same");
}

TEST(RedlockUrl, RejectsBadNodes) {
  expect_bad("redlock://a:1,,c:3", "node 2 is empty");
  expect_bad("redlock://a:1,b:2,", "node 3 is empty");
  expect_bad("redlock://a:1,b:0,c:3", "node 2 ('b:0')");
  expect_bad("redlock://a:1,b:2,c:x", "port");
  expect_bad("redlock://a:1,b:2,c:3/x", "database");
  expect_bad("redlock://a:1,b:2,c:3?cacert=/x", "redlock+tls://");
  expect_bad("redlock+tls://a:1,b:2,c:3?bogus=1", "unknown parameter");
  expect_bad("redis://a:1,b:2,c:3", "expected redlock://");
  expect_bad("redlock://", "empty");
}

TEST(RedlockUrl, RejectsWaitParameters) {
  expect_bad("redlock://a:1,b:2,c:3?wait_replicas=1", "'wait_replicas' applies to redis:// and rediss://");
  expect_bad("redlock://a:1,b:2,c:3/1?wait_timeout_ms=50", "'wait_timeout_ms' applies to redis://");
  expect_bad("redlock+tls://a:1,b:2,c:3?cacert=/x&wait_replicas=0", "not Redlock");
  // The list of known parameters offers only what Redlock takes.
  auto r = parse_redlock_url("redlock+tls://a:1,b:2,c:3?bogus=1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().find("wait_"), std::string::npos) << r.status().message();
}

TEST(RedlockUrl, ErrorsNeverEchoThePassword) {
  auto r = parse_redlock_url("redlock://u:hunter2@a:1,b:2,c:99999");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().find("hunter2"), std::string::npos);
}

// Redis Cluster: seeds share the node syntax with Redlock.
TEST(ClusterUrl, SeedsWithCredentialsTlsAndWaitMode) {
  auto seeds = parse_cluster_url("redis-cluster://u:p%40ss@a:7001,[::1]:7002,A:7001?wait_replicas=1").value();
  ASSERT_EQ(seeds.size(), 2u);  // a repeated seed is dropped
  EXPECT_EQ(seeds[0].host, "a");
  EXPECT_EQ(seeds[1].host, "::1");
  for (const auto& s : seeds) {
    EXPECT_EQ(s.username, "u");
    EXPECT_EQ(s.password, "p@ss");
    EXPECT_FALSE(s.tls);
    EXPECT_EQ(s.wait_replicas, 1);
  }
  auto one = parse_cluster_url("redis-cluster+tls://h:7000?cacert=/ca.pem").value();
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(one[0].tls);
  EXPECT_EQ(one[0].ca_file, "/ca.pem");
  EXPECT_TRUE(is_cluster_url("redis-cluster://h"));
  EXPECT_TRUE(is_cluster_url("redis-cluster+tls://h"));
  EXPECT_FALSE(is_cluster_url("redis://h"));
}

TEST(ClusterUrl, RejectsBadSeedsAndDatabases) {
  auto bad = [](const char* url, const char* part) {
    auto r = parse_cluster_url(url);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_EQ(r.code(), Errc::invalid_argument);
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find("secret"), std::string::npos);
  };
  bad("redis-cluster://a:1/2", "only database 0");
  bad("redis-cluster://a:1,,b:2", "node 2 is empty");
  bad("redis-cluster://u:secret@a:1,b:99999", "node 2");
  bad("redis-cluster://a:1?cacert=/x", "redis-cluster+tls://");
  bad("redis://a:1", "expected redis-cluster://");
  bad("redis-cluster://", "empty");
  EXPECT_TRUE(parse_cluster_url("redis-cluster://a:1/0").ok());
}

// ?nat=ANNOUNCED>REACHABLE: where a cluster or the sentinels announce nodes
// at addresses this client cannot reach.
TEST(ClusterUrl, NatEntriesMapAnnouncedAddresses) {
  auto seeds =
      parse_cluster_url("redis-cluster://gw:17001?nat=10.0.0.5:6379>gw:17001&nat=[FE80::1]:6380>[::1]:17002").value();
  ASSERT_EQ(seeds.size(), 1u);
  const auto& nat = seeds[0].nat;
  ASSERT_EQ(nat.size(), 2u);
  EXPECT_EQ(nat.at("10.0.0.5:6379"), std::make_pair(std::string("gw"), std::uint16_t{17001}));
  EXPECT_EQ(nat.at("[fe80::1]:6380"), std::make_pair(std::string("::1"), std::uint16_t{17002}));
  auto spec = parse_sentinel_url("redis-sentinel://s1/m?nat=10.0.0.5:6379>gw:1").value();
  EXPECT_EQ(spec.master.nat.size(), 1u) << "the sentinels name the master: its address is mapped";

  auto bad = [](Result<std::vector<RedisEndpoint>> r, const char* part) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), Errc::invalid_argument);
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
  };
  bad(parse_cluster_url("redis-cluster://a:1?nat=10.0.0.5:6379"), "ANNOUNCED>REACHABLE");
  bad(parse_cluster_url("redis-cluster://a:1?nat=10.0.0.5>gw:1"), "needs a port");
  bad(parse_cluster_url("redis-cluster://a:1?nat=10.0.0.5:1>gw:99999"), "port must be");
  bad(parse_cluster_url("redis-cluster://a:1?nat=h:1>a:2&nat=H:1>b:3"), "twice");
  bad(parse_redlock_url("redlock://a:1,b:2,c:3?nat=h:1>a:2"), "not Redlock");
  auto plain = parse_redis_url("redis://a:1?nat=h:1>a:2");
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("not to one server"), std::string::npos) << plain.status().message();
}

// ?pubsub=auto|classic|sharded: how a cluster's waiters hear releases.
TEST(ClusterUrl, PubSubModeIsOneOfThreeAndAClustersAlone) {
  EXPECT_TRUE(parse_cluster_url("redis-cluster://a:1").value()[0].pubsub.empty()) << "unset: auto";
  for (const char* mode : {"auto", "classic", "sharded"})
    EXPECT_EQ(parse_cluster_url(std::string("redis-cluster://a:1,b:2?pubsub=") + mode).value()[1].pubsub, mode);
  auto bad = [](Status s, const char* part) {
    EXPECT_EQ(s.code(), Errc::invalid_argument);
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
  };
  bad(parse_cluster_url("redis-cluster://a:1?pubsub=shard").status(), "auto, classic or sharded");
  bad(parse_redis_url("redis://a:1?pubsub=sharded").status(), "applies to redis-cluster://");
  bad(parse_sentinel_url("redis-sentinel://s1/m?pubsub=sharded").status(), "not to Sentinel");
  bad(parse_redlock_url("redlock://a:1,b:2,c:3?pubsub=classic").status(), "applies to redis-cluster://");
}

TEST(SentinelUrl, SentinelsMasterNameAndTheMastersSettings) {
  auto spec = parse_sentinel_url("redis-sentinel://u:pw@s1,s2:26380,[::1]/mymaster/2?wait_replicas=1").value();
  EXPECT_EQ(spec.master_name, "mymaster");
  ASSERT_EQ(spec.sentinels.size(), 3u);
  EXPECT_EQ(spec.sentinels[0].host, "s1");
  EXPECT_EQ(spec.sentinels[0].port, 26379);  // Sentinel's default port
  EXPECT_EQ(spec.sentinels[1].port, 26380);
  EXPECT_EQ(spec.sentinels[2].host, "::1");
  EXPECT_EQ(spec.sentinels[2].port, 26379);
  for (const auto& s : spec.sentinels) {
    EXPECT_TRUE(s.password.empty()) << "the master's credentials are not sent to sentinels";
    EXPECT_EQ(s.db, 0);
  }
  EXPECT_EQ(spec.master.username, "u");
  EXPECT_EQ(spec.master.password, "pw");
  EXPECT_EQ(spec.master.db, 2);
  EXPECT_EQ(spec.master.wait_replicas, 1);
  auto tls = parse_sentinel_url("redis-sentinel+tls://s1:1/m?cacert=/ca.pem").value();
  EXPECT_TRUE(tls.master.tls);
  EXPECT_TRUE(tls.sentinels[0].tls);
  EXPECT_EQ(tls.sentinels[0].ca_file, "/ca.pem");
  EXPECT_TRUE(is_sentinel_url("redis-sentinel://s/m"));
  EXPECT_FALSE(is_sentinel_url("redis://s"));
}

TEST(SentinelUrl, TheSentinelsOwnCredentialsComeFromTheirParameters) {
  auto spec =
      parse_sentinel_url("redis-sentinel://u:pw@s1,s2/m?sentinel_user=sentry&wait_replicas=1&sentinel_password=a%26b")
          .value();
  for (const auto& s : spec.sentinels) {
    EXPECT_EQ(s.username, "sentry");
    EXPECT_EQ(s.password, "a&b");
  }
  EXPECT_EQ(spec.master.username, "u") << "the userinfo stays the master's";
  EXPECT_EQ(spec.master.password, "pw");
  EXPECT_EQ(spec.master.wait_replicas, 1) << "the master's parameters around them still apply";
  auto lone = parse_sentinel_url("redis-sentinel://s1/m?sentinel_password=only").value();
  EXPECT_EQ(lone.sentinels[0].username, "");  // requirepass: the default user
  EXPECT_EQ(lone.sentinels[0].password, "only");
  EXPECT_TRUE(lone.master.password.empty());
  for (const char* url : {"redis-sentinel://s1/m?sentinel_user=sentry",
                          "redis-sentinel://s1/m?sentinel_password=", "redis-sentinel://s1/m?sentinel_password=%zz"}) {
    auto r = parse_sentinel_url(url);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_EQ(r.code(), Errc::invalid_argument);
    EXPECT_NE(r.status().message().find("sentinel_"), std::string::npos) << r.status().message();
  }
  auto elsewhere = parse_cluster_url("redis-cluster://a:1?sentinel_password=x");
  EXPECT_FALSE(elsewhere.ok()) << "only a Sentinel URL has sentinels";
}

TEST(SentinelUrl, RejectsAMissingNameAndBadNodes) {
  auto bad = [](const char* url, const char* part) {
    auto r = parse_sentinel_url(url);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_EQ(r.code(), Errc::invalid_argument);
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find("secret"), std::string::npos);
  };
  bad("redis-sentinel://s1:26379", "master's name is missing");
  bad("redis-sentinel://s1:26379/", "master's name is missing");
  bad("redis-sentinel://u:secret@s1,,s2/m", "node 2 is empty");
  bad("redis-sentinel://s1/m/x", "database");
  bad("redis://s1/m", "expected redis-sentinel://");
}

}  // namespace
}  // namespace dlock::detail

#include "redis/url.hpp"

#include <gtest/gtest.h>

#include <dlock/client.hpp>

namespace dlock::detail {
namespace {

TEST(Url, PlainDefaults) {
  auto ep = parse_redis_url("redis://127.0.0.1").value();
  EXPECT_FALSE(ep.tls);
  EXPECT_EQ(ep.host, "127.0.0.1");
  EXPECT_EQ(ep.port, 6379);
  EXPECT_EQ(ep.db, 0);
  EXPECT_TRUE(ep.password.empty());
}

TEST(Url, CredentialsPortAndDb) {
  auto ep = parse_redis_url("redis://alice:s%40cret%3A1@db.example:7000/3").value();
  EXPECT_EQ(ep.username, "alice");
  EXPECT_EQ(ep.password, "s@cret:1");
  EXPECT_EQ(ep.host, "db.example");
  EXPECT_EQ(ep.port, 7000);
  EXPECT_EQ(ep.db, 3);
  EXPECT_EQ(ep.describe().find("cret"), std::string::npos) << "describe() must not show the password";
}

TEST(Url, PasswordOnlyForms) {
  EXPECT_EQ(parse_redis_url("redis://:pw@h:1").value().password, "pw");
  EXPECT_EQ(parse_redis_url("redis://pw@h:1").value().password, "pw");
  EXPECT_TRUE(parse_redis_url("redis://pw@h:1").value().username.empty());
}

TEST(Url, Ipv6) {
  auto ep = parse_redis_url("redis://[::1]:6380").value();
  EXPECT_EQ(ep.host, "::1");
  EXPECT_EQ(ep.port, 6380);
  EXPECT_EQ(ep.describe(), "redis://[::1]:6380");
}

TEST(Url, TlsParameters) {
  auto ep = parse_redis_url("rediss://h:6390?cacert=/etc/ca.pem&cert=/c.pem&key=/k.pem").value();
  EXPECT_TRUE(ep.tls);
  EXPECT_EQ(ep.ca_file, "/etc/ca.pem");
  EXPECT_EQ(ep.cert_file, "/c.pem");
  EXPECT_EQ(ep.key_file, "/k.pem");
}

TEST(Url, WaitParameters) {
  auto none = parse_redis_url("redis://h:1").value();
  EXPECT_FALSE(none.wait_replicas.has_value());
  EXPECT_FALSE(none.wait_timeout_ms.has_value());

  auto ep = parse_redis_url("redis://h:1/2?wait_replicas=2&wait_timeout_ms=250").value();
  EXPECT_EQ(ep.db, 2);
  EXPECT_EQ(ep.wait_replicas, 2);
  EXPECT_EQ(ep.wait_timeout_ms, 250);

  auto off = parse_redis_url("redis://h:1?wait_replicas=0").value();
  EXPECT_EQ(off.wait_replicas, 0);
  EXPECT_FALSE(off.wait_timeout_ms.has_value());

  auto tls = parse_redis_url("rediss://h:1?cacert=/ca.pem&wait_timeout_ms=5&wait_replicas=1").value();
  EXPECT_EQ(tls.ca_file, "/ca.pem");
  EXPECT_EQ(tls.wait_replicas, 1);
  EXPECT_EQ(tls.wait_timeout_ms, 5);
}

TEST(Url, LayoutParameter) {
  EXPECT_EQ(parse_redis_url("redis://h:1").value().layout, Layout::dlock);
  EXPECT_EQ(parse_redis_url("redis://h:1?layout=plain").value().layout, Layout::plain);
  // Given twice (a templated config appending one): refused, not the last winning.
  for (const char* twice : {"redis://h:1?layout=plain&layout=redisson", "redis://h:1?layout=plain&layout=plain",
                            "redis://h:1?pubsub=auto&pubsub=classic", "redis://h:1?wait_replicas=1&wait_replicas=2"}) {
    const auto r = parse_redis_url(twice);
    ASSERT_FALSE(r.ok()) << twice;
    EXPECT_NE(r.status().message().find("given twice"), std::string::npos) << r.status().to_string();
  }
  EXPECT_FALSE(parse_cluster_url("redis-cluster://a:1,b:2?layout=plain&layout=dlock").ok());
  EXPECT_FALSE(parse_sentinel_url("redis-sentinel://s:26379/m?layout=plain&layout=redisson").ok());
  EXPECT_EQ(parse_redis_url("rediss://h:1?layout=dlock&cacert=/ca.pem").value().layout, Layout::dlock);
  const auto seeds = parse_cluster_url("redis-cluster://a:1,b:2?layout=plain");
  ASSERT_TRUE(seeds.ok());
  ASSERT_EQ(seeds->size(), 2u);
  for (const auto& n : *seeds) EXPECT_EQ(n.layout, Layout::plain);
  EXPECT_EQ(parse_sentinel_url("redis-sentinel://s:26379/mymaster?layout=plain").value().master.layout, Layout::plain);

  EXPECT_EQ(parse_redis_url("redis://h:1?layout=redisson").value().layout, Layout::redisson);
  EXPECT_EQ(parse_cluster_url("redis-cluster://a:1?layout=redisson").value().front().layout, Layout::redisson);

  auto bad = parse_redis_url("redis://h:1?layout=curator");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::invalid_argument);
  EXPECT_NE(bad.status().message().find("'curator'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("plain"), std::string::npos) << "names what is offered";
  EXPECT_NE(bad.status().message().find("redisson"), std::string::npos) << "names what is offered";

  auto redlock = parse_redlock_url("redlock://a:1,b:2,c:3?layout=plain");
  ASSERT_FALSE(redlock.ok());
  EXPECT_EQ(redlock.status().code(), Errc::invalid_argument);
  EXPECT_NE(redlock.status().message().find("layout"), std::string::npos) << redlock.status().message();
}

TEST(Url, BadWaitParametersNameTheProblem) {
  struct Case {
    const char* url;
    const char* needle;
  };
  for (const Case& c : {Case{"redis://h:1?wait_replicas=-1", "wait_replicas must be"},
                        Case{"redis://h:1?wait_replicas=one", "wait_replicas must be"},
                        Case{"redis://h:1?wait_replicas=1.5", "wait_replicas must be"},
                        Case{"redis://h:1?wait_replicas=+1", "wait_replicas must be"},
                        Case{"redis://h:1?wait_replicas=99999999999", "wait_replicas must be"},
                        Case{"redis://h:1?wait_replicas=", "'wait_replicas' needs a value"},
                        Case{"redis://h:1?wait_replicas", "'wait_replicas' needs a value"},
                        Case{"redis://h:1?wait_timeout_ms=0", "wait_timeout_ms must be"},
                        Case{"redis://h:1?wait_timeout_ms=-5", "wait_timeout_ms must be"},
                        Case{"redis://h:1?wait_timeout_ms=10ms", "wait_timeout_ms must be"},
                        Case{"redis://h:1?wait_replicas=1&wait_timeout_ms=abc", "wait_timeout_ms must be"},
                        Case{"redis://h:1?wait_replica=1", "unknown parameter 'wait_replica'"},
                        Case{"redis://h:1?wait_timeout=100", "unknown parameter 'wait_timeout'"}}) {
    auto r = parse_redis_url(c.url);
    ASSERT_FALSE(r.ok()) << c.url;
    EXPECT_EQ(r.code(), Errc::invalid_argument) << c.url;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << c.url << ": " << r.status().message();
  }
}

TEST(Url, MalformedAreInvalidArgument) {
  for (const char* bad :
       {"", "localhost:6379", "http://h:1", "redis://", "redis://h:", "redis://h:0", "redis://h:70000",
        "redis://h:12ab", "redis://h:1/x", "redis://h:1/-1", "redis://h:1?cacert=/x", "rediss://h:1?bogus=1",
        "rediss://h:1?cert=/c", "rediss://h:1?cacert=", "redis://::1:6379", "redis://[::1", "redis://u:p%zz@h",
        "redis://alice@h:1x"}) {
    auto r = parse_redis_url(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.code(), Errc::invalid_argument) << bad;
  }
}

TEST(Url, ErrorsNeverEchoThePassword) {
  auto r = parse_redis_url("redis://u:hunter2@h:99999");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().find("hunter2"), std::string::npos);
}

// describe_url() for logs: every password out, everything else kept.
TEST(Url, DescribeLeavesEveryPasswordOut) {
  EXPECT_EQ(describe_url("redis://u:hunter2@h:1/2"), "redis://u:***@h:1/2");
  EXPECT_EQ(describe_url("redis://hunter2@h"), "redis://***@h");
  EXPECT_EQ(describe_url("redis://h:1"), "redis://h:1");
  EXPECT_EQ(describe_url("redis-sentinel://u:pw@s1,s2/m?sentinel_user=s&sentinel_password=hunter2&wait_replicas=1"),
            "redis-sentinel://u:***@s1,s2/m?sentinel_user=s&sentinel_password=***&wait_replicas=1");
  EXPECT_EQ(describe_url("postgres://app@db/locks?password=hunter2&sslmode=verify-full"),
            "postgres://app@db/locks?password=***&sslmode=verify-full");
  EXPECT_EQ(describe_url("postgres://db?sslpassword=hunter2#frag"), "postgres://db?sslpassword=***#frag");
  EXPECT_EQ(describe_url("redis://u:hun?ter2@h"), "redis://u:***@h") << "a stray '?' in a password";
  EXPECT_EQ(describe_url("sqlite:///var/a@b/locks.db"), "sqlite:///var/a@b/locks.db");
  EXPECT_EQ(describe_url("not a url"), "not a url");
}

}  // namespace
}  // namespace dlock::detail

// The registry: backends by URL scheme.
#include <boost/asio/io_context.hpp>

#include "backend_registry.hpp"

namespace dlock::detail {
namespace {

TEST(BackendRegistry, AnUnknownSchemeNamesTheSchemesThisBuildServes) {
  boost::asio::io_context io;
  ClientOptions options;
  BackendContext context{io, options, nullptr};
  auto consul = make_backend("consul://127.0.0.1:8500/locks", context);
  ASSERT_FALSE(consul.ok());
  EXPECT_EQ(consul.code(), Errc::invalid_argument);
  EXPECT_NE(consul.status().message().find("'consul'"), std::string::npos) << consul.status().message();
  EXPECT_NE(consul.status().message().find("redis, rediss, redlock"), std::string::npos) << consul.status().message();
  auto none = make_backend("localhost:6379", context);
  EXPECT_EQ(none.code(), Errc::invalid_argument);
  auto secret = make_backend("nope://user:hunter2@host", context);
  EXPECT_EQ(secret.status().message().find("hunter2"), std::string::npos);
  auto bad = make_backend("localhost:hunter2@x", context);
  EXPECT_EQ(bad.status().message().find("hunter2"), std::string::npos) << bad.status().message();
}

TEST(BackendRegistry, EachRedisSchemeMakesABackend) {
  boost::asio::io_context io;
  ClientOptions options;
  BackendContext context{io, options, nullptr};
  EXPECT_TRUE(make_backend("redis://127.0.0.1:1", context).ok());
  EXPECT_TRUE(make_backend("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", context).ok());
  auto wait = make_backend("redis://127.0.0.1:1?wait_replicas=2", context);
  EXPECT_TRUE(wait.ok());
  EXPECT_EQ(options.wait_replicas, 2) << "the URL fills in an option left at its default";
}

}  // namespace
}  // namespace dlock::detail

#include <gtest/gtest.h>

#include "core/url.hpp"

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

TEST(Url, MalformedAreInvalidArgument) {
  for (const char* bad : {"", "localhost:6379", "http://h:1", "redis://", "redis://h:", "redis://h:0",
                          "redis://h:70000", "redis://h:12ab", "redis://h:1/x", "redis://h:1/-1",
                          "redis://h:1?cacert=/x", "rediss://h:1?bogus=1", "rediss://h:1?cert=/c",
                          "rediss://h:1?cacert=", "redis://::1:6379", "redis://[::1", "redis://u:p%zz@h",
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

}  // namespace
}  // namespace dlock::detail

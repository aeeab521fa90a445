// TLS with certificate verification, and ACL users.
#include "integration/common.hpp"

namespace dlock::test {
namespace {

TEST(Tls, LocksOverTlsWithAVerifiedServer) {
  RedisServerOptions o;
  o.tls = true;
  RedisServer server(o);
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  Mutex a(client, "t1"), b(client, "t1");
  ASSERT_TRUE(a.try_lock());
  EXPECT_FALSE(b.try_lock());
  a.unlock();
  EXPECT_TRUE(b.try_lock());
}

TEST(Tls, MutualTlsWithAClientCertificate) {
  RedisServerOptions o;
  o.tls = true;
  o.tls_client_auth = true;
  RedisServer server(o);
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  EXPECT_TRUE(client.try_acquire("t2").ok());
}

TEST(Tls, AServerSignedByAnotherCaIsRejected) {
  RedisServerOptions o;
  o.tls = true;
  RedisServer server(o);
  std::string other_ca = make_ca(server.dir(), "not-the-server-ca");
  LogSink log;
  auto r =
      Client::try_connect("rediss://127.0.0.1:" + std::to_string(server.port()) + "?cacert=" + other_ca, quiet(log));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::tls_failed);
  EXPECT_NE(r.status().message().find("certificate"), std::string::npos) << r.status().message();
}

TEST(Tls, TlsClientOnAPlainPortFailsClearly) {
  RedisServer server;
  LogSink log;
  auto r = Client::try_connect("rediss://127.0.0.1:" + std::to_string(server.port()), quiet(log));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::tls_failed);
}

TEST(Tls, PlainClientOnATlsPortFails) {
  RedisServerOptions o;
  o.tls = true;
  RedisServer server(o);
  LogSink log;
  auto opts = quiet(log);
  opts.connect_timeout = 1000ms;
  auto r = Client::try_connect("redis://127.0.0.1:" + std::to_string(server.port()), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::unavailable);
}

TEST(Tls, MissingCaFileIsInvalidArgument) {
  LogSink log;
  auto r = Client::try_connect("rediss://127.0.0.1:1?cacert=/nonexistent/ca.crt", quiet(log));
  EXPECT_EQ(r.code(), Errc::invalid_argument);
}

class Acl : public ::testing::Test {
 protected:
  static RedisServerOptions options() {
    RedisServerOptions o;
    o.requirepass = "default-secret";
    o.acl_rules = {"alice on >alice-pw ~* &* +@all", "reader on >reader-pw ~* &* +@read +ping +auth"};
    return o;
  }
  RedisServer server{options()};
  LogSink log;
};

TEST_F(Acl, AclUserWithPasswordInTheUrl) {
  auto client = Client::connect(server.url_with_auth("alice", "alice-pw"), quiet(log));
  EXPECT_TRUE(client.try_acquire("a1").ok());
}

TEST_F(Acl, CredentialsFromOptionsKeepSecretsOutOfUrls) {
  auto o = quiet(log);
  o.username = "alice";
  o.password = "alice-pw";
  auto client = Client::connect(server.url(), o);
  EXPECT_TRUE(client.try_acquire("a2").ok());
}

TEST_F(Acl, WrongPasswordIsAuthFailedAndNotLogged) {
  auto r = Client::try_connect(server.url_with_auth("alice", "wrong-pw"), quiet(log));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::auth_failed);
  EXPECT_EQ(r.status().next_step(), NextStep::give_up);
  EXPECT_EQ(r.status().message().find("wrong-pw"), std::string::npos);
  EXPECT_FALSE(log.contains("wrong-pw"));
}

TEST_F(Acl, MissingPasswordIsAuthFailed) {
  auto r = Client::try_connect(server.url(), quiet(log));
  EXPECT_EQ(r.code(), Errc::auth_failed);
}

TEST_F(Acl, DefaultUserWithRequirepass) {
  auto client = Client::connect(server.url_with_auth("", "default-secret"), quiet(log));
  EXPECT_TRUE(client.try_acquire("a3").ok());
}

TEST_F(Acl, UserWithoutScriptPermissionGetsPermissionDenied) {
  auto client = Client::connect(server.url_with_auth("reader", "reader-pw"), quiet(log));
  auto r = client.try_acquire("a4");
  EXPECT_EQ(r.code(), Errc::permission_denied);
}

}  // namespace
}  // namespace dlock::test

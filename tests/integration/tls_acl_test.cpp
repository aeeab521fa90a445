// TLS with certificate verification, and ACL users.
#include "integration/common.hpp"
#include "support/tcp_fault.hpp"

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

// Blocking calls over TLS take the fast path: on the caller's thread, on a
// connection of its own; and mutual TLS, a client certificate where the
// server asks for one, on both paths.
TEST(Tls, BlockingCallsRunOnTheCallersThread) {
  for (const bool client_auth : {false, true}) {
    RedisServerOptions o;
    o.tls = true;
    o.tls_client_auth = client_auth;
    RedisServer server(o);
    LogSink log;
    auto client = Client::connect(server.url(), quiet(log));
    EXPECT_TRUE(returns_beside_a_blocked_io_thread(client,
                                                   [&] {
                                                     auto lease = client.try_acquire("t-fast");
                                                     ASSERT_TRUE(lease.ok()) << lease.status().to_string();
                                                     EXPECT_EQ(server.cli({"EXISTS", "dlock:{t-fast}"}), "1");
                                                     EXPECT_TRUE(lease->release().ok());
                                                   }))
        << "client certificate: " << client_auth;
    EXPECT_EQ(server.cli({"EXISTS", "dlock:{t-fast}"}), "0");
  }
}

// A server whose certificate stops naming the address it is dialled at is
// refused by every new connection, the fast path's and the I/O thread's:
// no lock command reaches it.
TEST(Tls, ACertificateThatNoLongerNamesTheHostIsRefusedOnBothPaths) {
  RedisServerOptions o;
  o.tls = true;
  RedisServer server(o);
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  auto warm = client.try_acquire("t-warm");  // a fast-path connection, pooled
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  ASSERT_TRUE(warm->release().ok());
  make_leaf(server.dir(), "elsewhere", "elsewhere.example",
            "basicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=serverAuth\n"
            "subjectAltName=DNS:elsewhere.example\n");
  ASSERT_EQ(server.cli({"CONFIG", "SET", "tls-cert-file", server.dir() + "/elsewhere.crt", "tls-key-file",
                        server.dir() + "/elsewhere.key"}),
            "OK");
  server.cli({"CLIENT", "KILL", "TYPE", "normal"});
  std::this_thread::sleep_for(1100ms);  // the pooled connection is checked before use after 1 s idle
  auto r = client.try_acquire("t-host");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::tls_failed) << r.status().to_string();
  EXPECT_NE(r.status().message().find("certificate"), std::string::npos) << r.status().message();
  std::promise<Result<Lease>> io_path;
  client.async_acquire("t-host", 0ms, {}, [&](Result<Lease> got) { io_path.set_value(std::move(got)); });
  EXPECT_FALSE(io_path.get_future().get().ok());
  EXPECT_EQ(server.cli({"EXISTS", "dlock:{t-host}"}), "0");
  auto fresh = Client::try_connect(server.url(), quiet(log));
  ASSERT_FALSE(fresh.ok());
  EXPECT_EQ(fresh.code(), Errc::tls_failed) << fresh.status().to_string();
}

// Redlock over TLS: a blocking round writes to every master on the
// caller's thread, each on its own TLS connection, before it reads any.
TEST(Tls, RedlockRoundsRunOnTheCallersThread) {
  RedisServerOptions o;
  o.tls = true;
  std::vector<std::unique_ptr<RedisServer>> servers;
  std::string url = "redlock+tls://", bundle;
  for (int i = 0; i < 3; ++i) {
    servers.push_back(std::make_unique<RedisServer>(o));
    url += (i ? "," : "") + servers.back()->host_port();
    std::ifstream ca(servers.back()->ca_file());
    bundle += std::string(std::istreambuf_iterator<char>(ca), {});
  }
  const std::string cas = servers.front()->dir() + "/all-cas.crt";
  std::ofstream(cas) << bundle;
  LogSink log;
  auto client = Client::connect(url + "?cacert=" + cas, quiet(log));
  auto holding = [&] {
    int n = 0;
    for (auto& s : servers) n += s->cli({"EXISTS", "dlock:{t-redlock}"}) == "1";
    return n;
  };
  EXPECT_TRUE(returns_beside_a_blocked_io_thread(client, [&] {
    auto lease = client.try_acquire("t-redlock");
    ASSERT_TRUE(lease.ok()) << lease.status().to_string();
    EXPECT_EQ(holding(), 3);
    EXPECT_TRUE(lease->release().ok());
    EXPECT_EQ(holding(), 0) << "released on every master before release() returned";
  }));
}

// A TLS record that arrives in pieces: poll says readable at its first
// byte, but SSL_read needs the whole record. A blocking call still returns
// by its deadline, not when the rest comes (or the socket's timeout ends).
TEST(Tls, ARecordArrivingInPiecesDoesNotHoldACallPastItsDeadline) {
  RedisServerOptions o;
  o.tls = true;
  RedisServer server(o);
  TcpFault proxy(server.port());
  LogSink log;
  auto client =
      Client::connect("rediss://127.0.0.1:" + std::to_string(proxy.port()) + "?cacert=" + server.ca_file(), quiet(log));
  auto warm = client.try_acquire("t-split");  // a pooled fast-path connection through the proxy
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  ASSERT_TRUE(warm->release().ok());
  proxy.delay_ms = 1500;
  Mutex mutex(client, "t-split");
  const auto t0 = Clock::now();
  bool locked = true;
  EXPECT_NO_THROW(locked = mutex.try_lock_for(200ms));
  const auto took = Clock::now() - t0;
  EXPECT_LT(took, 1000ms) << "held by a record's missing piece";
  proxy.delay_ms = 0;
  if (locked) mutex.unlock();
  auto after = client.acquire("t-split", 5s);  // its stray grant, if any, undone or lapsed
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  EXPECT_TRUE(after->release().ok());
}

// A server that closes the connection during the TLS handshake (restarting,
// over maxclients, a reset link) is unavailable, retried; not a TLS fault.
TEST(Tls, AHandshakeCutShortIsUnavailableNotATlsFault) {
  RedisServerOptions o;
  o.tls = true;
  RedisServer server(o);  // for its CA file
  TcpFault closes;
  LogSink log;
  auto opts = quiet(log);
  opts.connect_timeout = 1000ms;
  auto r =
      Client::try_connect("rediss://127.0.0.1:" + std::to_string(closes.port()) + "?cacert=" + server.ca_file(), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Errc::unavailable) << r.status().to_string();
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

// Every master's connection shares the files: one that cannot be loaded is
// the caller's error, named, not a quorum lost to "no connection".
TEST(Tls, MissingCaFileIsInvalidArgumentForRedlockToo) {
  LogSink log;
  auto r =
      Client::try_connect("redlock+tls://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?cacert=/nonexistent/ca.crt", quiet(log));
  EXPECT_EQ(r.code(), Errc::invalid_argument);
  EXPECT_NE(r.status().message().find("/nonexistent/ca.crt"), std::string::npos) << r.status().to_string();
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

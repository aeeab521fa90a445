// The verifier's fault tools against a real redis-server: the TCP proxy
// (tools/torture/proxy.hpp) and the LD_PRELOAD clock shim with its
// ClockControl. Each fault is checked twice: from the client's side (what
// it sees) and in the proxy's stats (the proof the orchestrator logs).
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <dlock/dlock.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "clock_control.hpp"
#include "common/sync_redis.hpp"
#include "proxy.hpp"
#include "support/process.hpp"
#include "support/redis_server.hpp"
#include "support/sync_redis.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::RedisServer;
using dlock::test::SyncRedis;
using Clock = std::chrono::steady_clock;

// hiredis writes with plain write(): a connection the proxy reset must give
// EPIPE, not kill the test.
const bool kSigpipeIgnored = [] {
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}();

using Context = std::unique_ptr<dlock::tools::SyncRedis>;

// A plain connection with a short timeout, so a command that gets no reply
// fails fast instead of hanging the test. Null if it cannot connect.
Context connect(std::uint16_t port, std::chrono::milliseconds timeout = 5000ms) {
  auto c = std::make_unique<dlock::tools::SyncRedis>("127.0.0.1", port, timeout);
  std::string why;
  if (!c->connect(&why)) return nullptr;
  return c;
}

// The reply as text, or nullopt when the connection failed (timeout, reset,
// EOF): the case the faults are about.
std::optional<std::string> command(dlock::tools::SyncRedis* c, const std::vector<std::string>& args) {
  const dlock::tools::Reply r = c->cmd(args);
  if (r.status != dlock::tools::Reply::Status::ok) return std::nullopt;
  return r.text();
}

// Polls the server directly until `key` holds `value` or `timeout` passes.
bool wait_for_value(int port, const std::string& key, const std::string& value,
                    std::chrono::milliseconds timeout = 3000ms) {
  SyncRedis direct(port);
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (direct.cmd({"GET", key}) == value) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
}

class TortureProxy : public ::testing::Test {
 protected:
  TortureProxy() : proxy_("127.0.0.1", static_cast<std::uint16_t>(server_.port())) {
    port_ = proxy_.add_link("a");
    proxy_.start();
  }
  RedisServer server_;
  torture::Proxy proxy_;
  std::uint16_t port_ = 0;
};

TEST_F(TortureProxy, ForwardsCommandsOnEveryLink) {
  const std::uint16_t port_b = proxy_.add_link("b");  // after start()
  EXPECT_NE(port_b, port_);
  for (std::uint16_t port : {port_, port_b}) {
    auto c = connect(port);
    ASSERT_TRUE(c);
    EXPECT_EQ(command(c.get(), {"PING"}), "PONG");
    const std::string key = "k" + std::to_string(port);
    EXPECT_EQ(command(c.get(), {"SET", key, "v"}), "OK");
    EXPECT_EQ(command(c.get(), {"GET", key}), "v");
  }
  const auto a = proxy_.stats("a");
  EXPECT_EQ(a.connections, 1u);
  EXPECT_GT(a.bytes_up, 0u);
  EXPECT_GT(a.bytes_down, 0u);
  EXPECT_EQ(a.resets, 0u);
  EXPECT_EQ(a.bytes_dropped, 0u);
  const auto all = proxy_.stats("");
  EXPECT_EQ(all.connections, 2u);
  EXPECT_EQ(all.bytes_up, a.bytes_up + proxy_.stats("b").bytes_up);

  EXPECT_THROW(proxy_.stats("nope"), std::invalid_argument);
  EXPECT_THROW(proxy_.blackhole("nope", true), std::invalid_argument);
  EXPECT_THROW(proxy_.add_link("a"), std::invalid_argument);
  EXPECT_THROW(proxy_.add_link(""), std::invalid_argument);
}

TEST_F(TortureProxy, DelayAndHeldRepliesSlowTheRoundTrip) {
  auto c = connect(port_);
  ASSERT_TRUE(c);
  ASSERT_EQ(command(c.get(), {"PING"}), "PONG");

  proxy_.set_delay("a", 150ms);
  auto t0 = Clock::now();
  EXPECT_EQ(command(c.get(), {"SET", "k", "v"}), "OK");
  EXPECT_GE(Clock::now() - t0, 300ms);  // 150 ms each way
  auto s = proxy_.stats("a");
  EXPECT_GE(s.delayed_chunks, 2u);
  EXPECT_GE(s.max_delay_applied_ms, 150);

  proxy_.set_delay("a", 0ms);
  proxy_.hold_replies("", 250ms);
  t0 = Clock::now();
  EXPECT_EQ(command(c.get(), {"GET", "k"}), "v");
  EXPECT_GE(Clock::now() - t0, 250ms);
  s = proxy_.stats("a");
  EXPECT_GE(s.held_chunks, 1u);
  EXPECT_GE(s.max_delay_applied_ms, 250);

  proxy_.hold_replies("a", 0ms);
  const auto held = s.held_chunks;
  EXPECT_EQ(command(c.get(), {"PING"}), "PONG");
  EXPECT_EQ(proxy_.stats("a").held_chunks, held);
}

TEST_F(TortureProxy, BlackholeHoldsBytesUntilHealed) {
  auto c = connect(port_, 300ms);
  ASSERT_TRUE(c);
  ASSERT_EQ(command(c.get(), {"PING"}), "PONG");

  proxy_.blackhole("a", true);
  EXPECT_EQ(command(c.get(), {"SET", "k", "v"}), std::nullopt);  // times out
  // A connection made during the partition reaches the server only later.
  auto c2 = connect(port_, 300ms);
  ASSERT_TRUE(c2);
  EXPECT_EQ(command(c2.get(), {"SET", "k2", "v2"}), std::nullopt);
  std::this_thread::sleep_for(100ms);
  SyncRedis direct(server_.port());
  EXPECT_EQ(direct.cmd({"GET", "k"}), "(nil)");
  EXPECT_EQ(direct.cmd({"GET", "k2"}), "(nil)");
  EXPECT_EQ(proxy_.stats("a").connections, 2u);

  proxy_.blackhole("a", false);
  EXPECT_TRUE(wait_for_value(server_.port(), "k", "v"));
  EXPECT_TRUE(wait_for_value(server_.port(), "k2", "v2"));
  const auto s = proxy_.stats("a");
  EXPECT_GE(s.max_delay_applied_ms, 300);
  EXPECT_EQ(s.resets, 0u);

  auto c3 = connect(port_);
  ASSERT_TRUE(c3);
  EXPECT_EQ(command(c3.get(), {"PING"}), "PONG");
}

TEST_F(TortureProxy, DroppedReplyAfterTheServerAppliedTheWrite) {
  auto c = connect(port_);
  ASSERT_TRUE(c);
  ASSERT_EQ(command(c.get(), {"PING"}), "PONG");

  proxy_.drop_replies("a", true);
  EXPECT_EQ(c->cmd({"SET", "k", "v"}).status, dlock::tools::Reply::Status::unknown) << "sent; its reply lost";
  SyncRedis direct(server_.port());
  EXPECT_EQ(direct.cmd({"GET", "k"}), "v");
  const auto s = proxy_.stats("a");
  EXPECT_GT(s.bytes_dropped, 0u);
  EXPECT_EQ(s.resets, 1u);

  proxy_.drop_replies("a", false);
  auto c2 = connect(port_);
  ASSERT_TRUE(c2);
  EXPECT_EQ(command(c2.get(), {"GET", "k"}), "v");
}

TEST_F(TortureProxy, ResetClosesOpenConnections) {
  auto c = connect(port_);
  ASSERT_TRUE(c);
  ASSERT_EQ(command(c.get(), {"PING"}), "PONG");

  proxy_.reset("a");
  EXPECT_EQ(proxy_.stats("a").resets, 1u);
  EXPECT_NE(c->cmd({"PING"}).status, dlock::tools::Reply::Status::ok) << "the connection was reset";

  auto c2 = connect(port_);
  ASSERT_TRUE(c2);
  EXPECT_EQ(command(c2.get(), {"PING"}), "PONG");
}

TEST_F(TortureProxy, RefuseResetsNewConnections) {
  auto old = connect(port_);
  ASSERT_TRUE(old);
  ASSERT_EQ(command(old.get(), {"PING"}), "PONG");

  proxy_.refuse("a", true);
  auto c = connect(port_);  // the kernel may complete the handshake first
  if (c) {
    EXPECT_EQ(command(c.get(), {"PING"}), std::nullopt);
  }
  EXPECT_EQ(command(old.get(), {"PING"}), "PONG");  // existing ones are left alone
  auto s = proxy_.stats("a");
  EXPECT_EQ(s.refused, 1u);
  EXPECT_EQ(s.connections, 1u);

  proxy_.refuse("a", false);
  auto c2 = connect(port_);
  ASSERT_TRUE(c2);
  EXPECT_EQ(command(c2.get(), {"PING"}), "PONG");
}

// A host gone from the network: a new connection hangs in SYN (it is
// neither accepted nor refused), an open one gets no answer; healed, a new
// connection gets in.
TEST_F(TortureProxy, UnreachableHangsNewAndOpenConnectionsUntilHealed) {
  auto old = connect(port_, 400ms);
  ASSERT_TRUE(old);
  ASSERT_EQ(command(old.get(), {"PING"}), "PONG");

  proxy_.unreachable("a", true);
  const auto t0 = Clock::now();
  EXPECT_EQ(connect(port_, 400ms), nullptr) << "a new connection got in";
  EXPECT_GE(Clock::now() - t0, 350ms) << "refused at once, not left hanging";
  EXPECT_EQ(command(old.get(), {"PING"}), std::nullopt) << "the open connection was answered";

  proxy_.unreachable("a", false);
  auto c = connect(port_, 5000ms);
  ASSERT_TRUE(c);
  EXPECT_EQ(command(c.get(), {"PING"}), "PONG");
}

TEST_F(TortureProxy, UpstreamRestartOnTheSamePort) {
  auto c = connect(port_);
  ASSERT_TRUE(c);
  ASSERT_EQ(command(c.get(), {"PING"}), "PONG");

  server_.stop();
  EXPECT_EQ(command(c.get(), {"PING"}), std::nullopt);
  auto down = connect(port_);
  if (down) {
    EXPECT_EQ(command(down.get(), {"PING"}), std::nullopt);
  }
  EXPECT_GE(proxy_.stats("a").resets, 1u);  // the upstream connect failed

  server_.start();
  auto c2 = connect(port_);
  ASSERT_TRUE(c2);
  EXPECT_EQ(command(c2.get(), {"PING"}), "PONG");
}

// More than the proxy queues per direction (8 MiB): it stops reading, the
// sender blocks on TCP flow control, and everything arrives after healing.
TEST_F(TortureProxy, LargeWriteThroughABlackhole) {
  const std::string big(20 * 1024 * 1024, 'x');
  proxy_.blackhole("a", true);
  std::optional<std::string> reply;
  std::thread writer([&] {
    auto c = connect(port_, 30000ms);
    if (c) reply = command(c.get(), {"SET", "big", big});
  });
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(proxy_.stats("a").bytes_up, 0u);
  proxy_.blackhole("a", false);
  writer.join();
  EXPECT_EQ(reply, "OK");

  auto c = connect(port_, 30000ms);
  ASSERT_TRUE(c);
  EXPECT_EQ(command(c.get(), {"STRLEN", "big"}), std::to_string(big.size()));
  EXPECT_EQ(command(c.get(), {"GET", "big"}), big);
  EXPECT_GT(proxy_.stats("a").bytes_down, big.size());
}

// Destruction with connections open, bytes queued and timers pending must
// not hang or leak (ASan/TSan builds check the rest).
TEST(TortureProxyLifetime, StopsWithWorkInFlight) {
  RedisServer server;
  std::optional<torture::Proxy> proxy;
  proxy.emplace("127.0.0.1", static_cast<std::uint16_t>(server.port()));
  const std::uint16_t port = proxy->add_link("a");
  const std::uint16_t held_port = proxy->add_link("held");
  proxy->start();
  auto c = connect(port, 300ms);
  auto held = connect(held_port, 300ms);
  ASSERT_TRUE(c && held);
  ASSERT_EQ(command(c.get(), {"PING"}), "PONG");
  ASSERT_EQ(command(held.get(), {"PING"}), "PONG");
  proxy->set_delay("a", 10000ms);
  proxy->blackhole("held", true);
  EXPECT_EQ(command(c.get(), {"PING"}), std::nullopt);
  EXPECT_EQ(command(held.get(), {"PING"}), std::nullopt);
  proxy.reset();
  auto after = connect(port, 300ms);
  EXPECT_FALSE(after);  // nobody listens any more

  // Never started, links added: nothing runs, nothing leaks.
  torture::Proxy idle("127.0.0.1", static_cast<std::uint16_t>(server.port()));
  idle.add_link("x");
  idle.blackhole("", true);
  EXPECT_EQ(idle.stats("").connections, 0u);
}

// ---- clock shim -----------------------------------------------------------

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dlock-clock-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Redlock with three of five masters answering late through the proxies
// (their replies held past the per-node timeout, the servers themselves
// healthy): no grant, and the late grants are undone behind them.
TEST(RedlockThroughProxies, LateNodesDoNotCountAndAreUndone) {
  std::vector<std::unique_ptr<RedisServer>> servers;
  std::vector<std::unique_ptr<torture::Proxy>> proxies;
  std::string url = "redlock://";
  for (int i = 0; i < 5; ++i) {
    servers.push_back(std::make_unique<RedisServer>());
    proxies.push_back(std::make_unique<torture::Proxy>("127.0.0.1", servers.back()->port()));
    url += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(proxies.back()->add_link("c"));
    proxies.back()->start();
  }
  dlock::ClientOptions o;
  o.logger = [](dlock::LogLevel, std::string_view) {};
  auto client = dlock::Client::connect(url, o);
  auto holders = [&] {
    int n = 0;
    for (auto& s : servers) n += SyncRedis(s->port()).integer({"EXISTS", "dlock:{late}"}) == 1;
    return n;
  };

  dlock::LockOptions lo;
  lo.lease = 1000ms;
  lo.error_retry = 0ms;
  {  // Every connection up (and its scripts loaded) before the fault.
    auto warm = client.try_acquire("warm-up", lo);
    ASSERT_TRUE(warm.ok()) << warm.status().to_string();
    ASSERT_TRUE(warm->release().ok());
  }
  // Lease 1 s: a master's answer counts within 100 ms; these come after 1.5 s.
  for (int i = 2; i < 5; ++i) proxies[i]->hold_replies("c", 1500ms);
  const auto t0 = Clock::now();
  auto r = client.try_acquire("late", lo);
  const auto took = Clock::now() - t0;
  ASSERT_FALSE(r.ok()) << "three late masters must not make a majority";
  EXPECT_TRUE(r.code() == dlock::Errc::outcome_unknown || r.code() == dlock::Errc::unavailable)
      << r.status().to_string();
  EXPECT_LT(took, 1000ms) << "decided at the per-node timeout, not when the late answers came";
  for (int i = 2; i < 5; ++i) {
    proxies[i]->hold_replies("c", 0ms);
    EXPECT_GT(proxies[i]->stats("c").held_chunks, 0u) << "node " << i << "'s replies were held";
  }
  // The undo went behind the acquire on each connection: nothing stays locked.
  const auto until = Clock::now() + 5s;
  while (holders() > 0 && Clock::now() < until) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(holders(), 0);

  // Healed (once the held replies drain): granted on all five.
  dlock::LockOptions retrying;
  retrying.lease = 1000ms;  // default error_retry: waits out the held replies
  auto lease = client.acquire("late", 5s, retrying);
  ASSERT_TRUE(lease.ok()) << lease.status().to_string();
  for (const auto end = Clock::now() + 1s; holders() < 5 && Clock::now() < end;) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(holders(), 5);
  EXPECT_TRUE(lease->release().ok());
}

TEST(ClockControl, WritesTheOffsetFile) {
  TempDir dir;
  torture::ClockControl clock(dir.path() + "/clock");
  EXPECT_EQ(clock.path(), dir.path() + "/clock");
  EXPECT_EQ(clock.offset(), 0ms);
  clock.set_offset(-90s);
  EXPECT_EQ(clock.offset(), -90000ms);
  std::ifstream in(clock.path(), std::ios::binary);
  std::int64_t stored = 0;
  in.read(reinterpret_cast<char*>(&stored), sizeof stored);
  EXPECT_EQ(in.gcount(), 8);
  EXPECT_EQ(stored, -90000);
}

#ifdef DLOCK_CLOCK_SHIM_PATH
// A redis-server started with the shim, stopped by the destructor.
class ShimmedRedis {
 public:
  ShimmedRedis(const std::string& dir, const std::string& clock_file) {
    const dlock::test::Env env = {{"LD_PRELOAD", DLOCK_CLOCK_SHIM_PATH}, {"DLOCK_CLOCK_SHIM_FILE", clock_file}};
    for (int attempt = 0; attempt < 5; ++attempt) {  // the free port may be taken meanwhile
      port_ = dlock::test::free_port();
      pid_ = dlock::test::spawn({"redis-server", "--port", std::to_string(port_), "--bind", "127.0.0.1", "--dir", dir,
                                 "--save", "", "--appendonly", "no", "--daemonize", "no"},
                                env, dir + "/redis.out")
                 .pid;
      const auto deadline = Clock::now() + 10s;
      while (Clock::now() < deadline) {
        if (dlock::test::wait_exit(pid_, 0ms) != -1) {
          pid_ = -1;
          break;
        }
        if (auto c = connect(static_cast<std::uint16_t>(port_), 500ms); c && command(c.get(), {"PING"}) == "PONG")
          return;
        std::this_thread::sleep_for(20ms);
      }
      stop();
    }
    std::ifstream out(dir + "/redis.out");
    throw std::runtime_error("shimmed redis-server did not start: " +
                             std::string(std::istreambuf_iterator<char>(out), {}));
  }
  ~ShimmedRedis() { stop(); }
  int port() const { return port_; }

 private:
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    if (dlock::test::wait_exit(pid_, 5000ms) == -1) {
      ::kill(pid_, SIGKILL);
      dlock::test::wait_exit(pid_, 5000ms);
    }
    pid_ = -1;
  }
  int port_ = 0;
  pid_t pid_ = -1;
};

// "sec\nusec" from TIME, in ms.
long long time_ms(SyncRedis& r) {
  const std::string t = r.cmd({"TIME"});
  const auto nl = t.find('\n');
  return std::stoll(t.substr(0, nl)) * 1000 + std::stoll(t.substr(nl + 1)) / 1000;
}

TEST(ClockShim, JumpsTheServersWallClock) {
  TempDir dir;
  torture::ClockControl clock(dir.path() + "/clock");
  ShimmedRedis server(dir.path(), clock.path());
  SyncRedis r(server.port());

  ASSERT_EQ(r.cmd({"SET", "lock", "tokA", "NX", "PX", "30000"}), "OK");
  EXPECT_GT(r.integer({"PTTL", "lock"}), 29000);
  const long long t0 = time_ms(r);

  clock.set_offset(60s);
  const long long t1 = time_ms(r);
  EXPECT_GE(t1 - t0, 59900);
  EXPECT_LT(t1 - t0, 65000);
  EXPECT_LE(r.integer({"PTTL", "lock"}), 0);  // -2: expired on access
  EXPECT_EQ(r.cmd({"GET", "lock"}), "(nil)");
  EXPECT_EQ(r.cmd({"SET", "lock", "tokB", "NX", "PX", "30000"}), "OK");

  clock.set_offset(-60s);  // backwards too
  const long long t2 = time_ms(r);
  EXPECT_LE(t2 - t0, -59000);
  EXPECT_GT(t2 - t0, -65000);

  clock.set_offset(0ms);
  const long long t3 = time_ms(r);
  EXPECT_GE(t3 - t0, 0);
  EXPECT_LT(t3 - t0, 5000);
}
#else
TEST(ClockShim, JumpsTheServersWallClock) { GTEST_SKIP() << "built without DLOCK_CLOCK_SHIM_PATH"; }
#endif

}  // namespace

// A mixed fleet on one Redis name: dlock processes (?layout=plain) beside
// processes of a peer library that keeps the same layout (redis-py's Lock,
// npm redlock), holders SIGKILLed on both sides. Every critical section
// logs "start" and "end" to a Redis list (the server's order is the order of
// events) and bumps a counter with a non-atomic GET and SET: an overlap
// shows in the log as a start while another process holds, and in the count.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>

#include "integration/common.hpp"

namespace dlock::test {
namespace {

constexpr const char* kLog = "interop:log";
constexpr const char* kCounter = "interop:counter";

struct Event {
  std::string kind;  // start, end, killed
  std::string side;  // dlock, redis-py, redlock
  pid_t pid = 0;
  long long ns = 0;  // CLOCK_MONOTONIC: steady_clock, time.monotonic_ns, hrtime
  std::uint64_t fence = 0;
};

std::vector<Event> read_log(SyncRedis& redis) {
  std::istringstream in(redis.cmd({"LRANGE", kLog, "0", "-1"}));
  std::vector<Event> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    Event e;
    f >> e.kind >> e.side >> e.pid >> e.ns >> e.fence;
    out.push_back(e);
  }
  return out;
}

// What the log says, in the server's order.
struct Verdict {
  int starts = 0, ends = 0, overlaps = 0, kills_in_hold = 0;
  bool dlock_fences_increase = true;
  std::map<std::string, int> grants;                        // by side
  std::map<std::string, std::vector<double>> handovers_ms;  // "from -> to": end to next start
  std::string first_overlap;
};

Verdict judge(const std::vector<Event>& log) {
  Verdict v;
  const Event* holder = nullptr;
  const Event* last_end = nullptr;
  std::uint64_t last_fence = 0;
  for (const Event& e : log) {
    if (e.kind == "start") {
      ++v.starts;
      ++v.grants[e.side];
      if (holder != nullptr) {
        if (v.overlaps++ == 0)
          v.first_overlap = e.side + " " + std::to_string(e.pid) + " started while " + holder->side + " " +
                            std::to_string(holder->pid) + " held";
      }
      if (e.side == "dlock") {
        if (e.fence <= last_fence) v.dlock_fences_increase = false;
        last_fence = e.fence;
      }
      if (last_end != nullptr)
        v.handovers_ms[last_end->side + " -> " + e.side].push_back(static_cast<double>(e.ns - last_end->ns) / 1e6);
      holder = &e;
      last_end = nullptr;
    } else if (e.kind == "end") {
      ++v.ends;
      if (holder != nullptr && holder->pid == e.pid) holder = nullptr;
      last_end = &e;
    } else if (e.kind == "killed") {
      if (holder != nullptr && holder->pid == e.pid) {
        holder = nullptr;
        ++v.kills_in_hold;
      }
      last_end = nullptr;  // the next grant waited for the lease, not a release
    }
  }
  return v;
}

double median(std::vector<double> xs) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

long long mono_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// A dlock service: the same loop as the peers' workers.
int dlock_worker(const std::string& url, int port, const std::string& name, double seconds, milliseconds lease,
                 int hold_ms) {
  ClientOptions o;
  o.logger = [](LogLevel, std::string_view) {};
  auto client = Client::connect(url, o);
  SyncRedis redis(port);
  LockOptions lo;
  lo.watchdog_lease = lease;
  lo.renew_interval = lease / 3;
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  int grants = 0;
  while (Clock::now() < end) {
    auto lk = client.acquire(name, std::chrono::duration_cast<milliseconds>(end - Clock::now()) + 2s, lo);
    if (!lk.ok()) {
      if (lk.status().code() == Errc::timeout) continue;
      std::fprintf(stderr, "dlock worker: %s\n", lk.status().to_string().c_str());
      return 4;
    }
    ++grants;
    const std::string me = " dlock " + std::to_string(::getpid()) + " ";
    redis.cmd({"RPUSH", kLog, "start" + me + std::to_string(mono_ns()) + " " + std::to_string(lk->fence())});
    const std::string cur = redis.cmd({"GET", kCounter});
    const long long v = cur == "(nil)" ? 0 : std::stoll(cur);
    std::this_thread::sleep_for(milliseconds(std::uniform_int_distribution<int>(0, hold_ms)(rng)));
    redis.cmd({"SET", kCounter, std::to_string(v + 1)});
    redis.cmd({"RPUSH", kLog, "end" + me + std::to_string(mono_ns())});
    if (Status s = lk->release(); !s.ok()) {
      std::fprintf(stderr, "dlock worker: release: %s\n", s.to_string().c_str());
      return 5;
    }
    std::this_thread::sleep_for(milliseconds(std::uniform_int_distribution<int>(0, 20)(rng)));  // a service's pace
  }
  return grants > 0 ? 0 : 3;
}

struct Peer {
  std::string side;
  std::vector<std::string> command;  // the interpreter and its worker script
  Env env;
};

// The peer's program, or why it cannot run here (the test is skipped: the
// project's set-up installs both, scripts/test).
// Debian's python3-redis is /usr/bin/python3's (another python3 may come
// first in PATH).
std::optional<Peer> redis_py() {
  const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  if (run({python, "-c", "import redis"}, 20s).exit_code != 0) return std::nullopt;
  return Peer{"redis-py", {python, std::string(DLOCK_PEERS_DIR) + "/redispy_lock_worker.py"}, {}};
}

std::optional<Peer> npm_redlock() {
  const char* dir = std::getenv("DLOCK_PEERS_MODULES");
  if (dir == nullptr || !std::filesystem::exists(std::filesystem::path(dir) / "node_modules" / "redlock")) {
    return std::nullopt;
  }
  return Peer{
      "redlock", {"node", std::string(DLOCK_PEERS_DIR) + "/redlock_worker.mjs"}, {{"DLOCK_PEERS_MODULES", dir}}};
}

// `procs` processes of each side on one name for `seconds`, leases of
// `lease`; the holder SIGKILLed `kills` times, the sides in turn.
void run_mixed_fleet(const Peer& peer, int procs, double seconds, int kills) {
  RedisServer server;
  const int port = server.port();
  const std::string url = server.url() + "?layout=plain";
  const std::string name = "interop:job";
  constexpr milliseconds kLease{1500};
  constexpr int kHoldMs = 20;

  struct Proc {
    pid_t pid;
    std::string side;
    bool killed = false;
  };
  std::vector<Proc> procs_;
  // dlock's workers first, forked before this process has any client.
  for (int i = 0; i < procs; ++i)
    procs_.push_back({fork_child([&] { return dlock_worker(url, port, name, seconds, kLease, kHoldMs); }), "dlock"});
  for (int i = 0; i < procs; ++i) {
    std::vector<std::string> argv = peer.command;
    for (const std::string& a : {std::to_string(port), name, std::string(kLog), std::string(kCounter),
                                 std::to_string(seconds), std::to_string(kLease.count()), std::to_string(kHoldMs)})
      argv.push_back(a);
    procs_.push_back({spawn(argv, peer.env).pid, peer.side});
  }

  SyncRedis redis(port);
  // Kill a holder of each side in turn: one that has logged its start and
  // not its end holds the lock now (killed after its write of the start).
  const auto run_end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds / (kills + 2)));
  int killed = 0;
  for (int k = 0; k < kills && Clock::now() < run_end - 2s; ++k) {
    const std::string want = k % 2 == 0 ? "dlock" : peer.side;
    const auto give_up = Clock::now() + 3s;
    while (Clock::now() < give_up) {
      std::istringstream last(redis.cmd({"LINDEX", kLog, "-1"}));
      Event e;
      last >> e.kind >> e.side >> e.pid;
      auto p = std::find_if(procs_.begin(), procs_.end(), [&](const Proc& x) { return x.pid == e.pid; });
      if (e.kind == "start" && e.side == want && p != procs_.end() && !p->killed) {
        ::kill(p->pid, SIGKILL);
        wait_exit(p->pid, 10s);
        p->killed = true;
        redis.cmd(
            {"RPUSH", kLog, "killed " + p->side + " " + std::to_string(p->pid) + " " + std::to_string(mono_ns())});
        ++killed;
        break;
      }
      std::this_thread::sleep_for(1ms);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds / (kills + 2)));
  }

  for (Proc& p : procs_) {
    if (p.killed) continue;
    EXPECT_EQ(wait_exit(p.pid, std::chrono::duration_cast<milliseconds>(run_end - Clock::now()) + 30s), 0)
        << p.side << " worker " << p.pid << " (3: a dlock worker never granted)";
  }
  const Verdict v = judge(read_log(redis));
  EXPECT_EQ(v.overlaps, 0) << v.first_overlap;
  EXPECT_TRUE(v.dlock_fences_increase) << "fences among dlock's holders must grow";
  EXPECT_GE(killed, std::min(kills, 1)) << "no holder was killed: the faults did not run";
  const std::string counted = redis.cmd({"GET", kCounter});
  const long long count = counted == "(nil)" ? 0 : std::stoll(counted);
  EXPECT_GE(count, v.ends) << "an update was lost";
  EXPECT_LE(count, v.starts);
  EXPECT_GT(v.grants.count("dlock") ? v.grants.at("dlock") : 0, 0);
  EXPECT_GT(v.grants.count(peer.side) ? v.grants.at(peer.side) : 0, 0);
  std::printf("%s: %d critical sections (dlock %d, %s %d), %d holders killed\n", peer.side.c_str(), v.starts,
              v.grants.count("dlock") ? v.grants.at("dlock") : 0, peer.side.c_str(),
              v.grants.count(peer.side) ? v.grants.at(peer.side) : 0, v.kills_in_hold);
  for (const auto& [dir, ms] : v.handovers_ms)
    std::printf("  hand-over %s: median %.2f ms over %zu\n", dir.c_str(), median(ms), ms.size());
}

// The judge itself, on logs made by hand: it can fail.
TEST(RedisInterop, TheLogJudgeSeesAnOverlapAndALostHoldersKill) {
  std::vector<Event> ok{{"start", "dlock", 1, 10, 5},
                        {"end", "dlock", 1, 20},
                        {"start", "redis-py", 2, 30},
                        {"killed", "redis-py", 2, 40},
                        {"start", "dlock", 3, 50, 6}};
  Verdict v = judge(ok);
  EXPECT_EQ(v.overlaps, 0);
  EXPECT_EQ(v.kills_in_hold, 1);
  EXPECT_EQ(v.handovers_ms["dlock -> redis-py"].size(), 1u);
  EXPECT_TRUE(v.dlock_fences_increase);
  std::vector<Event> bad{{"start", "dlock", 1, 10, 5},
                         {"start", "redis-py", 2, 30},
                         {"end", "dlock", 1, 40},
                         {"start", "dlock", 3, 50, 4}};
  v = judge(bad);
  EXPECT_EQ(v.overlaps, 2) << "redis-py 2 over dlock 1, then dlock 3 over redis-py 2";
  EXPECT_FALSE(v.dlock_fences_increase);
}

TEST(RedisInterop, DlockAndRedisPyLockShareOneNameBothWays) {
  auto peer = redis_py();
  if (!peer) GTEST_SKIP() << "python3 with redis-py (Debian's python3-redis) is not installed";
  run_mixed_fleet(*peer, 3, 8, 2);
}

TEST(RedisInterop, DlockAndNpmRedlockShareOneNameBothWays) {
  auto peer = npm_redlock();
  if (!peer) GTEST_SKIP() << "npm redlock is not installed ($DLOCK_PEERS_MODULES; scripts/test installs it)";
  run_mixed_fleet(*peer, 3, 8, 2);
}

// The peers' own view of a dlock holder, and dlock's of theirs: a token
// each library compares with its own, so neither releases or extends the
// other's lock, and dlock's status names the peer's hold.
TEST(RedisInterop, APeersHoldIsBusyAndNamedAndItsReleaseIsNotDlocks) {
  RedisServer server;
  SyncRedis redis(server.port());
  // redis-py's Lock, by hand: SET NX PX with its token.
  ASSERT_EQ(redis.cmd({"SET", "shared:job", "0123456789abcdef0123456789abcdef", "NX", "PX", "5000"}), "OK");
  LogSink log;
  auto client = Client::connect(server.url() + "?layout=plain", quiet(log));
  auto busy = client.acquire("shared:job", 0ms);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), Errc::busy);
  auto info = client.inspect("shared:job");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_TRUE(info->held);
  EXPECT_NE(info->holder.find("a peer library"), std::string::npos) << info->holder;
  EXPECT_NE(info->holder.find("0123456789abcdef"), std::string::npos) << info->holder;
  auto names = client.list("shared:");
  ASSERT_TRUE(names.ok()) << names.status().to_string();
  ASSERT_EQ(names->size(), 1u);
  EXPECT_EQ(names->front().name, "shared:job");
  EXPECT_TRUE(names->front().info.held);

  // The peer releases (compare-and-delete with its token): dlock's waiter
  // polls and is granted, with a fence.
  std::thread peer([&] {
    std::this_thread::sleep_for(100ms);
    SyncRedis r(server.port());
    r.cmd({"EVAL", "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0", "1",
           "shared:job", "0123456789abcdef0123456789abcdef"});
  });
  auto lk = client.acquire("shared:job", 5s);
  peer.join();
  ASSERT_TRUE(lk.ok()) << lk.status().to_string();
  EXPECT_GT(lk->fence(), 0u);
  // The peer's release script, with its token, leaves dlock's hold alone;
  // its SET NX finds it taken.
  EXPECT_EQ(
      redis.cmd({"EVAL", "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
                 "1", "shared:job", "0123456789abcdef0123456789abcdef"}),
      "0");
  EXPECT_EQ(redis.cmd({"SET", "shared:job", "fedcba", "NX", "PX", "5000"}), "(nil)");
  EXPECT_EQ(redis.integer({"EXISTS", "shared:job"}), 1);
  EXPECT_GT(redis.integer({"PTTL", "shared:job"}), 0) << "dlock's hold carries its lease, as a peer's";
  ASSERT_TRUE(lk->release().ok());
  EXPECT_EQ(redis.integer({"EXISTS", "shared:job"}), 0) << "released: gone, so a peer's SET NX takes it";
  // Lines are refused, naming why.
  SharedMutex rw(client, "shared:rw");
  try {
    rw.lock_shared();
    ADD_FAILURE() << "a read lock in the plain layout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("layout=plain"), std::string::npos) << e.what();
  }
}

// Bad input in a shared key space: a name that holds another type, a TTL
// out of range. Told as what it is; nothing is written.
TEST(RedisInterop, ANameHoldingAnotherTypeIsWrongTypeAndLeftAlone) {
  RedisServer server;
  SyncRedis redis(server.port());
  ASSERT_EQ(redis.integer({"HSET", "a-hash", "f", "v"}), 1);
  LogSink log;
  auto client = Client::connect(server.url() + "?layout=plain", quiet(log));
  auto r = client.acquire("a-hash", 0ms);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::wrong_type) << r.status().to_string();
  EXPECT_EQ(redis.cmd({"HGET", "a-hash", "f"}), "v");
  auto info = client.inspect("a-hash");
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), Errc::wrong_type) << info.status().to_string();
  LockOptions zero;
  zero.lease = 0ms;
  auto bad = client.acquire("fresh", 0ms, zero);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::invalid_argument) << bad.status().to_string();
  EXPECT_EQ(redis.integer({"EXISTS", "fresh"}), 0);
}

// A peer's key with no expiry (redis-py's Lock with timeout=None): dlock
// polls, and is granted once the peer deletes it.
TEST(RedisInterop, APeersKeyWithoutExpiryIsPolledNotSpunOn) {
  RedisServer server;
  SyncRedis redis(server.port());
  ASSERT_EQ(redis.cmd({"SET", "forever", "peer-token"}), "OK");
  LogSink log;
  auto client = Client::connect(server.url() + "?layout=plain", quiet(log));
  const auto sent_before = client.stats().commands_sent;
  auto busy = client.acquire("forever", 600ms);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), Errc::timeout);
  // Polled from 2 ms doubling to 64 ms: about 15 tries in 600 ms, not a spin.
  EXPECT_LT(client.stats().commands_sent - sent_before, 60u);
  std::thread peer([&] {
    std::this_thread::sleep_for(200ms);
    SyncRedis r(server.port());
    r.cmd({"DEL", "forever"});
  });
  auto lk = client.acquire("forever", 5s);
  peer.join();
  EXPECT_TRUE(lk.ok()) << lk.status().to_string();
}

}  // namespace
}  // namespace dlock::test

// The backends every contract suite runs against (lock_contract_test,
// recipe_contract_test): real servers started per test, and the fake. A new
// backend joins by adding its environment to kBackends. A build without a
// backend (DLOCK_WITH_<BACKEND>=0) leaves its environment out.
#ifndef DLOCK_TESTS_INTEGRATION_BACKEND_ENVS_HPP_
#define DLOCK_TESTS_INTEGRATION_BACKEND_ENVS_HPP_

#include <signal.h>
#if DLOCK_WITH_SQLITE
#include <sqlite3.h>
#endif

#include <algorithm>
#include <dlock/dlock.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "client_core.hpp"
#include "support/backend_driver.hpp"
#include "support/etcd_cluster.hpp"
#include "support/fake_backend.hpp"
#include "support/postgres_server.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_server.hpp"
#include "support/temp_dir.hpp"
#include "support/zk_probe.hpp"
#include "support/zookeeper_server.hpp"

namespace dlock::test {

// Servers for one test, and clients of them.
class BackendEnv {
 public:
  virtual ~BackendEnv() = default;
  virtual Client client() = 0;
  // Redlock's fence comes from node 0 and only when node 0 is in the
  // granting majority: a grant may have none (fence 0), as documented.
  virtual bool every_grant_fenced() const { return true; }
  // Holds live as long as a session (ZooKeeper): a fixed lease is refused.
  virtual bool session_held() const { return false; }
  // Makes the server alive but silent (true), or answer again (false).
  // false: this backend has no such fault.
  virtual bool freeze(bool) { return false; }
  // Fair, shared and counted locks are offered (Redlock refuses them).
  virtual bool lines() const { return true; }
  // The URL another program (the dlock tool) reaches the server by; empty
  // where there is none (the fake lives in this process).
  virtual std::string url() const { return {}; }
  // Deletes one hold of `name`'s line (a read hold, a permit), the one
  // granted with `fence`, behind its holder's back as an operator would.
  // false: not found, or not possible here.
  virtual bool drop_hold(const std::string& /*name*/, std::uint64_t /*fence*/) { return false; }
  // The raw backend, below any client (the decision table drives it).
  virtual BackendMaker maker() { return maker_of(url()); }
};

#if DLOCK_WITH_REDIS
// The shared holder with fence ARGV[1] out of a line key's state (see
// src/redis/lua/line_lib.lua: s = shared holders, f = fence); its expiry
// kept. Returns how many were removed.
inline constexpr const char* kDropSharedHolder = R"lua(
local raw = redis.call('get', KEYS[1])
if not raw then return 0 end
local st = cmsgpack.unpack(raw)
local n = 0
for i = #(st.s or {}), 1, -1 do
  if tonumber(st.s[i].f) == tonumber(ARGV[1]) then table.remove(st.s, i); n = n + 1 end
end
if n == 0 then return 0 end
local ttl = redis.call('pttl', KEYS[1])
if ttl > 0 then redis.call('set', KEYS[1], cmsgpack.pack(st), 'px', ttl)
else redis.call('set', KEYS[1], cmsgpack.pack(st)) end
return n
)lua";
inline std::string line_key(const std::string& name) { return "dlock:{" + name + "}:q"; }
#endif

// SIGSTOP / SIGCONT to `pid` and every process below it.
inline void signal_tree(pid_t root, int sig) {
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    ::kill(p, sig);
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      const std::string n = e.path().filename();
      if (n.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream stat(e.path() / "stat");
      std::string line;
      std::getline(stat, line);
      const auto close = line.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(line.substr(close + 2));
      char state;
      pid_t ppid = 0;
      rest >> state >> ppid;
      if (ppid == p) todo.push_back(std::stoi(n));
    }
  }
}

inline ClientOptions quiet() {
  ClientOptions o;
  o.logger = [](LogLevel, std::string_view) {};
  return o;
}

#if DLOCK_WITH_REDIS
// redis://, or with `tls` rediss://: the same server over TLS, its
// certificate verified on the blocking fast path's connections and the I/O
// thread's alike.
class RedisEnv final : public BackendEnv {
 public:
  explicit RedisEnv(bool tls = false) : server_(options(tls)) {}
  Client client() override { return Client::connect(server_.url(), quiet()); }
  std::string url() const override { return server_.url(); }
  bool freeze(bool on) override {
    on ? server_.pause() : server_.resume();
    return true;
  }
  bool drop_hold(const std::string& name, std::uint64_t fence) override {
    return server_.cli({"EVAL", kDropSharedHolder, "1", line_key(name), std::to_string(fence)}) == "1";
  }

 private:
  static RedisServerOptions options(bool tls) {
    RedisServerOptions o;
    o.tls = tls;
    return o;
  }
  RedisServer server_;
};

// redis://...?layout=plain: one string key per lock, the layout redis-py's
// Lock and npm redlock keep; ?layout=redisson: Redisson's RLock hash
// (redis_interop_test.cpp runs those libraries beside it). No line.
class PeerLayoutRedisEnv final : public BackendEnv {
 public:
  explicit PeerLayoutRedisEnv(std::string layout) : layout_(std::move(layout)) {}
  Client client() override { return Client::connect(url(), quiet()); }
  std::string url() const override { return server_.url() + "?layout=" + layout_; }
  bool lines() const override { return false; }
  bool freeze(bool on) override {
    on ? server_.pause() : server_.resume();
    return true;
  }

 private:
  std::string layout_;
  RedisServer server_;
};

class RedlockEnv final : public BackendEnv {
 public:
  bool every_grant_fenced() const override { return false; }
  bool lines() const override { return false; }
  RedlockEnv() {
    for (int i = 0; i < 3; ++i) servers_.push_back(std::make_unique<RedisServer>());
  }
  Client client() override { return Client::connect(redlock_url(), quiet()); }
  BackendMaker maker() override { return maker_of(redlock_url()); }
  bool freeze(bool on) override {
    for (auto& s : servers_) on ? s->pause() : s->resume();
    return true;
  }

 private:
  std::string redlock_url() const {
    std::string url = "redlock://";
    for (std::size_t i = 0; i < servers_.size(); ++i)
      url += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(servers_[i]->port());
    return url;
  }
  std::vector<std::unique_ptr<RedisServer>> servers_;
};

// Redis Cluster: three masters (no replicas: the contract is about the
// lock, failovers have their own tests), each lock on its slot's master.
class ClusterEnv final : public BackendEnv {
 public:
  ClusterEnv() : cluster_(3, 0) {}
  Client client() override { return Client::connect(cluster_.url(), quiet()); }
  std::string url() const override { return cluster_.url(); }
  bool freeze(bool on) override {
    for (int i = 0; i < cluster_.size(); ++i) on ? cluster_.node(i).pause() : cluster_.node(i).resume();
    return true;
  }
  // On whichever master has the key's slot (the others answer MOVED).
  bool drop_hold(const std::string& name, std::uint64_t fence) override {
    for (int i = 0; i < cluster_.size(); ++i)
      if (cluster_.cli(i, {"EVAL", kDropSharedHolder, "1", line_key(name), std::to_string(fence)}) == "1") return true;
    return false;
  }

 private:
  RedisCluster cluster_;
};

#endif  // DLOCK_WITH_REDIS

#if DLOCK_WITH_SQLITE
class SqliteEnv final : public BackendEnv {
 public:
  Client client() override { return Client::connect(url(), quiet()); }
  std::string url() const override { return "sqlite://" + dir_.file("locks.db"); }
  // Another connection holds the file's write lock.
  bool freeze(bool on) override {
    if (on) {
      if (sqlite3_open(dir_.file("locks.db").c_str(), &db_) != SQLITE_OK) return false;
      return sqlite3_exec(db_, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) == SQLITE_OK;
    }
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
    db_ = nullptr;
    return true;
  }
  bool drop_hold(const std::string& name, std::uint64_t fence) override {
    sqlite3* db = nullptr;
    bool dropped = false;
    if (sqlite3_open(dir_.file("locks.db").c_str(), &db) == SQLITE_OK) {
      sqlite3_busy_timeout(db, 5000);
      const std::string sql = "DELETE FROM dlock_line WHERE kind = 0 AND name = ? AND fence = ?";
      sqlite3_stmt* st = nullptr;
      if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 2, static_cast<sqlite3_int64>(fence));
        dropped = sqlite3_step(st) == SQLITE_DONE && sqlite3_changes(db) > 0;
      }
      sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return dropped;
  }
  ~SqliteEnv() override {
    if (db_) sqlite3_close(db_);
  }

 private:
  TempDir dir_;
  sqlite3* db_ = nullptr;
};

#endif  // DLOCK_WITH_SQLITE

#if DLOCK_WITH_POSTGRES
class PostgresEnv final : public BackendEnv {
 public:
  Client client() override { return Client::connect(server_.url(), quiet()); }
  std::string url() const override { return server_.url(); }
  // The postmaster and every backend process.
  bool freeze(bool on) override {
    std::ifstream pidfile(server_.dir() + "/data/postmaster.pid");
    pid_t pid = 0;
    if (!(pidfile >> pid) || pid <= 0) return false;
    signal_tree(pid, on ? SIGSTOP : SIGCONT);
    return true;
  }
  bool drop_hold(const std::string& name, std::uint64_t fence) override {
    // Names here are the tests' own (no quotes).
    const std::string out =
        server_.psql("WITH d AS (DELETE FROM dlock_locks_line WHERE holder AND name = '" + name +
                     "' AND fence = " + std::to_string(fence) + " RETURNING 1) SELECT count(*) FROM d");
    return out.rfind("1", 0) == 0;
  }

 private:
  PostgresServer server_;
};

#endif  // DLOCK_WITH_POSTGRES

#if DLOCK_WITH_ZOOKEEPER
class ZooKeeperEnv final : public BackendEnv {
 public:
  ZooKeeperEnv() : zk_(1) {}
  bool session_held() const override { return true; }
  Client client() override { return Client::connect(url(), quiet()); }
  std::string url() const override { return "zk://" + zk_.hosts() + "/contract"; }
  bool freeze(bool on) override {
    on ? zk_.pause(0) : zk_.resume(0);
    return true;
  }
  // The deepest node created with `fence` as its zxid (a parent made in
  // the same multi-op shares it).
  bool drop_hold(const std::string& /*name*/, std::uint64_t fence) override {
    ZkProbe probe(zk_.hosts());
    std::string deepest;
    for (const std::string& path : probe.tree("/contract"))
      if (static_cast<std::uint64_t>(probe.czxid(path)) == fence &&
          std::count(path.begin(), path.end(), '/') > std::count(deepest.begin(), deepest.end(), '/'))
        deepest = path;
    return !deepest.empty() && probe.remove_tree(deepest);
  }

 private:
  ZooKeeperEnsemble zk_;
};

#endif  // DLOCK_WITH_ZOOKEEPER

#if DLOCK_WITH_ETCD
// One member (the 3-member cluster's faults have their own tests,
// etcd_test): a lock's keys under the prefix "contract/".
class EtcdEnv final : public BackendEnv {
 public:
  EtcdEnv() : etcd_(1) {}
  bool session_held() const override { return true; }
  Client client() override { return Client::connect(url(), quiet()); }
  std::string url() const override { return etcd_.url("contract"); }
  bool freeze(bool on) override {
    on ? etcd_.pause(0) : etcd_.resume(0);
    return true;
  }
  // The key of `name`'s line created at `fence`, deleted with etcdctl.
  bool drop_hold(const std::string& name, std::uint64_t fence) override {
    for (const auto& [key, created] : etcd_.keys("contract/" + name + "/"))
      if (created == fence) return etcd_.etcdctl({"del", key}).out.rfind("1", 0) == 0;
    return false;
  }

 private:
  EtcdCluster etcd_;
};

#endif  // DLOCK_WITH_ETCD

class FakeEnv final : public BackendEnv {
 public:
  FakeEnv() { server_.caps.lines = true; }
  bool drop_hold(const std::string& name, std::uint64_t fence) override { return server_.drop_hold(name, fence); }
  BackendMaker maker() override { return server_.maker(); }
  Client client() override {
    auto core = detail::ClientCore::connect_with(server_.maker(), quiet());
    return detail::ClientFactory::make(std::move(core.value()));
  }

 private:
  testing::FakeServer server_;  // outlives the test's clients (declared in the fixture first)
};

struct Backend {
  const char* name;
  std::unique_ptr<BackendEnv> (*make)();
};

inline const Backend kBackends[] = {
#if DLOCK_WITH_REDIS
    {"redis", [] { return std::unique_ptr<BackendEnv>(new RedisEnv); }},
    {"rediss", [] { return std::unique_ptr<BackendEnv>(new RedisEnv(true)); }},
    {"redlock", [] { return std::unique_ptr<BackendEnv>(new RedlockEnv); }},
    {"redis_plain", [] { return std::unique_ptr<BackendEnv>(new PeerLayoutRedisEnv("plain")); }},
    {"redis_redisson", [] { return std::unique_ptr<BackendEnv>(new PeerLayoutRedisEnv("redisson")); }},
    {"cluster", [] { return std::unique_ptr<BackendEnv>(new ClusterEnv); }},
#endif
#if DLOCK_WITH_SQLITE
    {"sqlite", [] { return std::unique_ptr<BackendEnv>(new SqliteEnv); }},
#endif
#if DLOCK_WITH_POSTGRES
    {"postgres", [] { return std::unique_ptr<BackendEnv>(new PostgresEnv); }},
#endif
#if DLOCK_WITH_ZOOKEEPER
    {"zookeeper", [] { return std::unique_ptr<BackendEnv>(new ZooKeeperEnv); }},
#endif
#if DLOCK_WITH_ETCD
    {"etcd", [] { return std::unique_ptr<BackendEnv>(new EtcdEnv); }},
#endif
    {"fake", [] { return std::unique_ptr<BackendEnv>(new FakeEnv); }},
};

}  // namespace dlock::test

#endif  // DLOCK_TESTS_INTEGRATION_BACKEND_ENVS_HPP_

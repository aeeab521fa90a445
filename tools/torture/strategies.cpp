#include "strategies.hpp"

#include <dlock/client.hpp>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

#include "common/sync_redis.hpp"
#include "history.hpp"
#include "server_proc.hpp"
#include "strategies_cli.hpp"
#include "strategies_peers.hpp"
#include "strategies_recipes.hpp"
#include "strategies_sql.hpp"
#include "strategies_zk.hpp"

namespace torture {

using dlock::tools::Reply;
using dlock::tools::SyncRedis;

// redis://host:port for one server, redlock://host:p1,host:p2,... for more;
// the PostgreSQL superuser through the proxy; the SQLite file.
std::string dlock_url(LockServer server, const StrategyConfig& c) {
  if (!c.url.empty()) return c.url;
  if (server == LockServer::sqlite) return "sqlite://" + c.sqlite_path;
  if (server == LockServer::postgres)
    return "postgres://" + (c.user.empty() ? std::string("postgres") : c.user) + "@" + c.host + ":" +
           std::to_string(c.ports.at(0)) + "/postgres?application_name=" + c.client_name;
  if (server == LockServer::zookeeper) {
    // The session timeout is the lease: how long a silent holder keeps it.
    std::string url = "zk://";
    for (std::size_t i = 0; i < c.ports.size(); ++i) url += (i ? "," : "") + c.host + ":" + std::to_string(c.ports[i]);
    return url + "/torture?session_timeout=" + std::to_string(c.ttl_ms) + "ms";
  }
  if (server == LockServer::etcd) {
    // The lease is the session: etcd grants whole seconds.
    std::string url = "etcd://" + (c.user.empty() ? std::string() : c.user + "@");
    for (std::size_t i = 0; i < c.ports.size(); ++i) url += (i ? "," : "") + c.host + ":" + std::to_string(c.ports[i]);
    return url + "/torture?session_timeout=" + std::to_string((c.ttl_ms + 999) / 1000) + "s";
  }
  std::string url = (c.ports.size() == 1 ? "redis://" : "redlock://") + torture_userinfo();
  for (std::size_t i = 0; i < c.ports.size(); ++i) url += (i ? "," : "") + c.host + ":" + std::to_string(c.ports[i]);
  return url;
}

namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// ---- dlock ---------------------------------------------------------------

// dlock over one server, Redlock over several, PostgreSQL or SQLite: the
// same client code, only the URL differs.
class DlockStrategy final : public Strategy {
 public:
  DlockStrategy(LockServer server, const StrategyConfig& c) : config_(c) {
    dlock::ClientOptions options;
    // Scaled with the lease, as a 30 s lease would have a 2 s timeout.
    options.command_timeout = milliseconds(std::max<std::int64_t>(50, c.ttl_ms / 4));
    options.connect_timeout = options.command_timeout;
    options.reconnect_backoff_min = milliseconds(10);
    options.reconnect_backoff_max = milliseconds(std::max<std::int64_t>(20, c.ttl_ms / 4));
    options.logger = [](dlock::LogLevel, std::string_view) {};
    client_ = dlock::Client::connect(dlock_url(server, c), options);
  }

  AcquireResult acquire(milliseconds wait, std::function<void()> on_lost) override {
    dlock::LockOptions lo;
    lo.watchdog_lease = milliseconds(config_.ttl_ms);
    lo.renew_interval = milliseconds(config_.ttl_ms / 3);
    lo.error_retry = milliseconds(config_.ttl_ms);
    lo.on_lost = [on_lost = std::move(on_lost)](dlock::LossReason) { on_lost(); };
    auto r = client_->acquire(config_.key, wait, lo);
    if (r.ok()) {
      lease_.emplace(std::move(*r));
      return {Outcome::ok, lease_->fence(), {}};
    }
    const auto step = dlock::next_step(r.status().code());
    return {step == dlock::NextStep::unknown ? Outcome::info : Outcome::fail, 0, r.status().to_string()};
  }

  bool still_valid() const override { return lease_ && !lease_->lost() && Clock::now() < lease_->valid_until(); }

  std::optional<std::uint64_t> wakeups() const override { return client_->stats().wakeups; }

  ReleaseResult release() override {
    if (!lease_) return {Outcome::fail, "no lease"};
    auto s = lease_->release();
    lease_.reset();  // an unknown release is cleaned up by the library
    if (s.ok()) return {Outcome::ok, {}};
    return {dlock::next_step(s.code()) == dlock::NextStep::unknown ? Outcome::info : Outcome::fail, s.to_string()};
  }

 private:
  StrategyConfig config_;
  std::optional<dlock::Client> client_;
  std::optional<dlock::Lease> lease_;
};

// ---- the naive ones --------------------------------------------------------

// What a plain client library does: a generous socket timeout, and a reply
// that is late is still a reply.
constexpr milliseconds kNaiveTimeout{5000};
constexpr milliseconds kPollEvery{10};  // the articles retry after 10 ms

class NaiveBase : public Strategy {
 public:
  explicit NaiveBase(const StrategyConfig& c) : config_(c), conn_(c.host, c.ports.at(0), kNaiveTimeout) {}

 protected:
  static Outcome outcome_of(const Reply& r) {
    if (r.status == Reply::Status::not_sent) return Outcome::fail;
    if (r.status == Reply::Status::unknown) return Outcome::info;
    return r.is_error ? Outcome::fail : Outcome::ok;
  }
  static std::string text(const Reply& r) { return r.failure.empty() ? r.str : r.failure; }

  // Retries `attempt` every 10 ms until it grants or `wait` passes. An
  // attempt whose reply was lost ends the acquire as unknown.
  AcquireResult poll(milliseconds wait, const std::function<std::optional<AcquireResult>()>& attempt) {
    const auto deadline = Clock::now() + wait;
    for (;;) {
      if (auto r = attempt()) return *r;
      if (Clock::now() >= deadline) return {Outcome::fail, 0, "timeout"};
      std::this_thread::sleep_for(kPollEvery);
    }
  }

  StrategyConfig config_;
  SyncRedis conn_;
};

// Seed 001, version 1: SETNX, work, DEL. No expiry at all.
class SetnxDel final : public NaiveBase {
 public:
  using NaiveBase::NaiveBase;
  AcquireResult acquire(milliseconds wait, std::function<void()>) override {
    return poll(wait, [&]() -> std::optional<AcquireResult> {
      auto r = conn_.cmd({"SETNX", config_.key, "1"});
      if (!r.good()) return AcquireResult{outcome_of(r), 0, text(r)};
      if (r.integer == 1) return AcquireResult{Outcome::ok, 0, {}};
      return std::nullopt;
    });
  }
  ReleaseResult release() override {
    auto r = conn_.cmd({"DEL", config_.key});
    if (!r.good()) return {outcome_of(r), text(r)};
    return {r.integer == 1 ? Outcome::ok : Outcome::fail, r.integer == 1 ? "" : "nothing deleted"};
  }
};

// Seed 000, method 1: SETNX, then EXPIRE as a second command. A crash in
// between leaves a lock that never expires.
class SetnxThenExpire final : public NaiveBase {
 public:
  using NaiveBase::NaiveBase;
  AcquireResult acquire(milliseconds wait, std::function<void()>) override {
    return poll(wait, [&]() -> std::optional<AcquireResult> {
      auto r = conn_.cmd({"SETNX", config_.key, std::to_string(wall_ms() + config_.ttl_ms)});
      if (!r.good()) return AcquireResult{outcome_of(r), 0, text(r)};
      if (r.integer != 1) return std::nullopt;
      config_.failpoint("acquire:mid");
      const auto seconds = std::max<std::int64_t>(1, (config_.ttl_ms + 999) / 1000);
      auto e = conn_.cmd({"EXPIRE", config_.key, std::to_string(seconds)});
      (void)e;  // the article ignores EXPIRE's reply: the lock is held either way
      return AcquireResult{Outcome::ok, 0, {}};
    });
  }
  ReleaseResult release() override {
    auto r = conn_.cmd({"DEL", config_.key});
    if (!r.good()) return {outcome_of(r), text(r)};
    return {r.integer == 1 ? Outcome::ok : Outcome::fail, r.integer == 1 ? "" : "nothing deleted"};
  }
};

// Seed 000 method 2 and seed 002 (the pattern the SETNX page once gave):
// the value is the client's wall-clock expiry; a waiter that finds it in the
// past breaks the lock with GETSET; release deletes if the holder's own
// clock says the lock has not expired yet.
class GetsetTimestamp final : public NaiveBase {
 public:
  using NaiveBase::NaiveBase;
  AcquireResult acquire(milliseconds wait, std::function<void()>) override {
    return poll(wait, [&]() -> std::optional<AcquireResult> {
      const std::string expires = std::to_string(wall_ms() + config_.ttl_ms + 1);
      auto r = conn_.cmd({"SETNX", config_.key, expires});
      if (!r.good()) return AcquireResult{outcome_of(r), 0, text(r)};
      if (r.integer == 1) return AcquireResult{Outcome::ok, 0, {}};
      auto cur = conn_.cmd({"GET", config_.key});
      if (!cur.good()) return AcquireResult{outcome_of(cur), 0, text(cur)};
      if (cur.is_nil || std::stoll(cur.str) >= wall_ms()) return std::nullopt;
      auto old = conn_.cmd({"GETSET", config_.key, expires});
      if (!old.good()) return AcquireResult{outcome_of(old), 0, text(old)};
      if (!old.is_nil && old.str == cur.str) return AcquireResult{Outcome::ok, 0, {}};
      return std::nullopt;
    });
  }
  ReleaseResult release() override {
    auto cur = conn_.cmd({"GET", config_.key});
    if (!cur.good()) return {outcome_of(cur), text(cur)};
    if (cur.is_nil || wall_ms() >= std::stoll(cur.str))
      return {Outcome::fail, "expired by this client's clock; not deleted"};
    config_.failpoint("release:mid");
    auto r = conn_.cmd({"DEL", config_.key});
    if (!r.good()) return {outcome_of(r), text(r)};
    return {r.integer == 1 ? Outcome::ok : Outcome::fail, {}};
  }
};

// Seed 001, version 3: SET NX PX with a random token (right), released by
// GET, compare, DEL as separate commands (wrong: the key can change hands
// between the compare and the DEL).
class TokenGetThenDel final : public NaiveBase {
 public:
  explicit TokenGetThenDel(const StrategyConfig& c) : NaiveBase(c), rng_(std::random_device{}()) {}
  AcquireResult acquire(milliseconds wait, std::function<void()>) override {
    token_ = std::to_string(rng_()) + "-" + std::to_string(rng_());
    return poll(wait, [&]() -> std::optional<AcquireResult> {
      auto r = conn_.cmd({"SET", config_.key, token_, "NX", "PX", std::to_string(config_.ttl_ms)});
      if (!r.good()) return AcquireResult{outcome_of(r), 0, text(r)};
      if (!r.is_nil) return AcquireResult{Outcome::ok, 0, {}};
      return std::nullopt;
    });
  }
  ReleaseResult release() override {
    auto cur = conn_.cmd({"GET", config_.key});
    if (!cur.good()) return {outcome_of(cur), text(cur)};
    if (cur.is_nil || cur.str != token_) return {Outcome::fail, "not the owner"};
    config_.failpoint("release:mid");
    auto r = conn_.cmd({"DEL", config_.key});
    if (!r.good()) return {outcome_of(r), text(r)};
    return {r.integer == 1 ? Outcome::ok : Outcome::fail, {}};
  }

 private:
  std::mt19937_64 rng_;
  std::string token_;
};

}  // namespace

const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names{"dlock",
                                              "dlock-tls",
                                              "dlock-plain",
                                              "mixed-plain",
                                              "mixed-redisson",
                                              "mixed-redlock",
                                              "redlock",
                                              "cluster",
                                              "sentinel",
                                              "postgres",
                                              "sqlite",
                                              "zk",
                                              "mixed-kazoo",
                                              "etcd",
                                              "dlock-run",
                                              "setnx-del",
                                              "setnx-then-expire",
                                              "getset-timestamp",
                                              "token-get-then-del",
                                              "db-insert-unique",
                                              "db-insert-cleanup-job",
                                              "zk-herd"};
  static const std::vector<std::string> all = [] {
    std::vector<std::string> v;
    for (const auto& n : names)
      if (n != "etcd" || etcd_built()) v.push_back(n);
    for (const auto& r : recipe_strategy_names()) v.push_back(r);
    return v;
  }();
  return all;
}

bool etcd_built() {
#ifdef DLOCK_TORTURE_ETCD
  return true;
#else
  return false;
#endif
}

bool runs_peer_helper(const std::string& name) { return name.starts_with("mixed-"); }

bool is_naive(const std::string& name) {
  if (!recipe_of(name).empty()) return false;
  return name != "dlock" && name != "dlock-tls" && name != "dlock-plain" && name != "mixed-plain" &&
         name != "mixed-redisson" && name != "mixed-redlock" && name != "redlock" && name != "postgres" &&
         name != "sqlite" && name != "zk" && name != "mixed-kazoo" && name != "etcd" && name != "dlock-run" &&
         redis_topology_of(name).empty();
}

LockServer lock_server_of(const std::string& name) {
  if (!recipe_of(name).empty()) {  // <recipe>-<backend>
    const std::string backend = name.substr(name.rfind('-') + 1);
    if (backend == "sqlite") return LockServer::sqlite;
    if (backend == "zk") return LockServer::zookeeper;
    if (backend == "etcd") return LockServer::etcd;
    if (backend == "postgres") return LockServer::postgres;
    return LockServer::redis;
  }
  if (name == "sqlite" || name == "dlock-run") return LockServer::sqlite;
  if (name == "zk" || name == "zk-herd" || name == "mixed-kazoo") return LockServer::zookeeper;
  if (name == "etcd") return LockServer::etcd;
  if (name == "postgres" || name.rfind("db-", 0) == 0) return LockServer::postgres;
  return LockServer::redis;
}

std::string redis_topology_of(const std::string& name) {
  return name == "cluster" || name == "sentinel" ? name : std::string();
}

bool tls_of(const std::string& name) { return name == "dlock-tls"; }

int lock_nodes(const std::string& name) {
  if (name == "redlock") return 5;
  if (name == "cluster") return 6;
  if (name == "sentinel") return 2;
  if (lock_server_of(name) == LockServer::zookeeper || lock_server_of(name) == LockServer::etcd) return 3;
  return lock_server_of(name) == LockServer::sqlite ? 0 : 1;
}

std::unique_ptr<Strategy> make_strategy(const std::string& name, const StrategyConfig& config) {
  if (name == "dlock-run") {
    if (config.sqlite_path.empty()) throw std::invalid_argument("dlock-run needs a lock file");
    return make_cli_run(config);
  }
  if (!is_naive(name)) {
    const auto server = lock_server_of(name);
    if (server == LockServer::sqlite ? config.sqlite_path.empty()
                                     : static_cast<int>(config.ports.size()) != lock_nodes(name))
      throw std::invalid_argument(
          name + " needs " +
          (server == LockServer::sqlite ? "a lock file" : std::to_string(lock_nodes(name)) + " lock servers"));
    if (!recipe_of(name).empty()) return make_recipe(name, server, config);
    // A mixed fleet on one name: odd workers run redis-py's Lock, even ones
    // dlock on the layout they share.
    if (name == "mixed-plain" && config.client_name.size() > 1 && (config.client_name.back() - '0') % 2 == 1)
      return make_redispy_peer(config);
    // A mixed fleet on one ZooKeeper node: odd workers kazoo's Lock, even
    // ones dlock on its names (?layout=kazoo).
    if (name == "mixed-kazoo") {
      if (config.client_name.size() > 1 && (config.client_name.back() - '0') % 2 == 1)
        return make_kazoo_peer(config, "/torture/dlock/" + config.key);
      StrategyConfig kazoo = config;
      kazoo.url = dlock_url(server, config) + "&layout=kazoo";
      return std::make_unique<DlockStrategy>(server, kazoo);
    }
    // Redisson's RLock: odd workers node-redisson, even ones dlock on its
    // hash (?layout=redisson).
    if (name == "mixed-redisson") {
      if (config.client_name.size() > 1 && (config.client_name.back() - '0') % 2 == 1)
        return make_redisson_peer(config);
      StrategyConfig redisson = config;
      redisson.url = dlock_url(server, config) + "?layout=redisson";
      return std::make_unique<DlockStrategy>(server, redisson);
    }
    if (name == "mixed-redlock" && config.client_name.size() > 1 && (config.client_name.back() - '0') % 2 == 1)
      return make_redlock_peer(config);
    if (name == "dlock-plain" || name == "mixed-plain" || name == "mixed-redlock") {  // redis-py's, redlock's layout
      StrategyConfig plain = config;
      plain.url = dlock_url(server, config) + "?layout=plain";
      return std::make_unique<DlockStrategy>(server, plain);
    }
    return std::make_unique<DlockStrategy>(server, config);
  }
  if (name.rfind("db-", 0) == 0) return make_table_lock(name, config);
  if (name == "zk-herd") return make_zk_herd(config);
  if (name == "setnx-del") return std::make_unique<SetnxDel>(config);
  if (name == "setnx-then-expire") return std::make_unique<SetnxThenExpire>(config);
  if (name == "getset-timestamp") return std::make_unique<GetsetTimestamp>(config);
  if (name == "token-get-then-del") return std::make_unique<TokenGetThenDel>(config);
  throw std::invalid_argument("unknown strategy '" + name + "'");
}

}  // namespace torture

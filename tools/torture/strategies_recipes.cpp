#include "strategies_recipes.hpp"

#include <dlock/client.hpp>
#include <dlock/election.hpp>
#include <dlock/mutex.hpp>
#include <dlock/semaphore.hpp>
#include <dlock/shared_mutex.hpp>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>

namespace torture {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

const char* const kRecipes[] = {"fair", "rw", "semaphore", "election"};
const char* const kBackends[] = {"redis", "postgres", "sqlite", "zk", "etcd"};

// The worker's loss callback of the grant under way. The recipes take their
// LockOptions (and so on_lost) once, at construction; each grant sets its own.
struct LossSink {
  std::mutex mu;
  std::function<void()> fn;
  void set(std::function<void()> f) {
    std::lock_guard g(mu);
    fn = std::move(f);
  }
  void fire() {
    std::function<void()> f;
    {
      std::lock_guard g(mu);
      f = fn;
    }
    if (f) f();
  }
};

Outcome outcome_of(dlock::Errc code) {
  return dlock::next_step(code) == dlock::NextStep::unknown ? Outcome::info : Outcome::fail;
}

class RecipeBase : public Strategy {
 public:
  RecipeBase(LockServer server, const StrategyConfig& c) : config_(c), rng_(std::random_device{}()) {
    dlock::ClientOptions options;  // as DlockStrategy's: scaled with the lease
    options.command_timeout = milliseconds(std::max<std::int64_t>(50, c.ttl_ms / 4));
    options.connect_timeout = options.command_timeout;
    options.reconnect_backoff_min = milliseconds(10);
    options.reconnect_backoff_max = milliseconds(std::max<std::int64_t>(20, c.ttl_ms / 4));
    options.logger = [](dlock::LogLevel, std::string_view) {};
    client_.emplace(dlock::Client::connect(dlock_url(server, c), options));
    lock_options_.watchdog_lease = milliseconds(c.ttl_ms);
    lock_options_.renew_interval = milliseconds(c.ttl_ms / 3);
    lock_options_.error_retry = milliseconds(c.ttl_ms);
    lock_options_.holder = c.client_name;
    lock_options_.on_lost = [sink = sink_](dlock::LossReason) { sink->fire(); };
  }

  std::optional<std::uint64_t> wakeups() const override { return client_->stats().wakeups; }
  HoldPlan plan() const override { return plan_; }

 protected:
  // Runs one acquire call: ok with its fence, busy/timeout as fail, errors
  // by their next step.
  template <class Fn>
  AcquireResult attempt(const char* kind, std::function<void()> on_lost, Fn&& fn) {
    sink_->set(std::move(on_lost));
    plan_ = HoldPlan{kind, true, 1};
    AcquireResult r;
    try {
      if (auto fence = fn()) {
        r.outcome = Outcome::ok;
        r.fence = *fence;
      } else {
        r.outcome = Outcome::fail;
        r.detail = "timeout";
      }
    } catch (const dlock::Error& e) {
      r.outcome = outcome_of(e.code());
      r.detail = e.what();
    } catch (const std::exception& e) {
      r.outcome = Outcome::fail;
      r.detail = e.what();
    }
    return r;
  }
  static ReleaseResult released(const dlock::Status& s) {
    if (s.ok()) return {Outcome::ok, {}};
    return {outcome_of(s.code()), s.to_string()};
  }

  StrategyConfig config_;
  std::mt19937_64 rng_;
  std::optional<dlock::Client> client_;
  dlock::LockOptions lock_options_;
  std::shared_ptr<LossSink> sink_ = std::make_shared<LossSink>();
  HoldPlan plan_;
};

class FairMutex final : public RecipeBase {
 public:
  FairMutex(LockServer server, const StrategyConfig& c) : RecipeBase(server, c) {
    lock_options_.fair = true;
    mutex_.emplace(*client_, c.key, lock_options_);
  }
  AcquireResult acquire(milliseconds wait, std::function<void()> on_lost) override {
    return attempt("fair", std::move(on_lost), [&]() -> std::optional<std::uint64_t> {
      if (!mutex_->try_lock_for(wait)) return std::nullopt;
      return mutex_->fence();
    });
  }
  bool still_valid() const override {
    return mutex_->owns() && !mutex_->lost_token().stop_requested() && Clock::now() < mutex_->valid_until();
  }
  ReleaseResult release() override {
    if (!mutex_->owns()) return {Outcome::fail, "not held"};
    return released(mutex_->release());
  }

 private:
  std::optional<dlock::Mutex> mutex_;
};

class ReadWrite final : public RecipeBase {
 public:
  ReadWrite(LockServer server, const StrategyConfig& c) : RecipeBase(server, c) {
    rw_.emplace(*client_, c.key, lock_options_);
  }
  AcquireResult acquire(milliseconds wait, std::function<void()> on_lost) override {
    reading_ = std::uniform_real_distribution<double>(0, 1)(rng_) < 0.7;
    auto r = attempt(reading_ ? "shared" : "exclusive", std::move(on_lost), [&]() -> std::optional<std::uint64_t> {
      if (!(reading_ ? rw_->try_lock_shared_for(wait) : rw_->try_lock_for(wait))) return std::nullopt;
      return rw_->fence();
    });
    plan_.writes = !reading_;
    return r;
  }
  bool still_valid() const override {
    return (reading_ ? rw_->readers() > 0 : rw_->writing()) && !rw_->lost_token().stop_requested() &&
           Clock::now() < rw_->valid_until();
  }
  ReleaseResult release() override {
    if (reading_ ? rw_->readers() == 0 : !rw_->writing()) return {Outcome::fail, "not held"};
    if (reading_)
      rw_->unlock_shared();
    else
      rw_->unlock();
    return released(rw_->last_release_status());
  }

 private:
  std::optional<dlock::SharedMutex> rw_;
  bool reading_ = true;
};

class CountingSemaphore final : public RecipeBase {
 public:
  CountingSemaphore(LockServer server, const StrategyConfig& c) : RecipeBase(server, c) {
    sem_.emplace(*client_, c.key, c.permits, lock_options_);
  }
  AcquireResult acquire(milliseconds wait, std::function<void()> on_lost) override {
    auto r = attempt("permit", std::move(on_lost), [&]() -> std::optional<std::uint64_t> {
      if (!sem_->try_acquire_for(wait)) return std::nullopt;
      return sem_->fences().back();
    });
    plan_.writes = false;  // N holders at once: the registers would judge them as a mutex
    return r;
  }
  bool still_valid() const override {
    return sem_->held() > 0 && !sem_->lost_token().stop_requested() && Clock::now() < sem_->valid_until();
  }
  ReleaseResult release() override {
    if (sem_->held() == 0) return {Outcome::fail, "not held"};
    return released(sem_->release());
  }

 private:
  std::optional<dlock::Semaphore> sem_;
};

class LeaderElection final : public RecipeBase {
 public:
  LeaderElection(LockServer server, const StrategyConfig& c) : RecipeBase(server, c) {
    election_.emplace(*client_, c.key, c.client_name, lock_options_);
  }
  AcquireResult acquire(milliseconds wait, std::function<void()> on_lost) override {
    auto r = attempt("leader", std::move(on_lost), [&]() -> std::optional<std::uint64_t> {
      auto won = election_->campaign(wait);
      if (!won.ok()) {
        const auto code = won.code();
        if (code == dlock::Errc::timeout || code == dlock::Errc::busy) return std::nullopt;
        throw dlock::Error(won.status());
      }
      lead_ = std::move(*won);
      return lead_.term();
    });
    plan_.rounds = std::uniform_int_distribution<int>(1, 4)(rng_);  // then resign
    return r;
  }
  bool still_valid() const override { return lead_.leading(); }
  ReleaseResult release() override {
    if (lead_.term() == 0) return {Outcome::fail, "not leading"};
    auto s = lead_.resign();
    lead_ = dlock::Leadership();
    return released(s);
  }

 private:
  std::optional<dlock::Election> election_;
  dlock::Leadership lead_;
};

}  // namespace

std::string recipe_of(const std::string& strategy) {
  for (const char* r : kRecipes)
    for (const char* b : kBackends)
      if (strategy == std::string(r) + "-" + b) return r;
  return {};
}

const std::vector<std::string>& recipe_strategy_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const char* r : kRecipes)
      for (const char* b : kBackends)
        if (std::string(b) != "etcd" || etcd_built()) v.push_back(std::string(r) + "-" + b);
    return v;
  }();
  return names;
}

std::unique_ptr<Strategy> make_recipe(const std::string& name, LockServer server, const StrategyConfig& config) {
  const std::string recipe = recipe_of(name);
  if (recipe == "fair") return std::make_unique<FairMutex>(server, config);
  if (recipe == "rw") return std::make_unique<ReadWrite>(server, config);
  if (recipe == "semaphore") return std::make_unique<CountingSemaphore>(server, config);
  if (recipe == "election") return std::make_unique<LeaderElection>(server, config);
  throw std::invalid_argument("unknown recipe strategy '" + name + "'");
}

}  // namespace torture

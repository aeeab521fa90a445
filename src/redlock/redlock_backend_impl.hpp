// The Redlock backend's class: a quorum of independent Redis masters
// (redis/redis_backend.hpp's RedlockMaster each). Its members by concern:
// redlock_backend.cpp the I/O thread's rounds (acquire driving
// RedlockAcquire, release, renew, names, inspect: each a FanOut),
// redlock_fast_path.cpp the blocking rounds on the caller's thread.
#ifndef DLOCK_REDLOCK_REDLOCK_BACKEND_IMPL_HPP_
#define DLOCK_REDLOCK_REDLOCK_BACKEND_IMPL_HPP_

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <mutex>
#include <optional>

#include "core/quorum.hpp"
#include "core/redlock_round.hpp"
#include "core/token.hpp"
#include "core/transient.hpp"
#include "redis/redis_backend.hpp"
#include "redlock/fan_out.hpp"
#include "redlock/redlock_acquire.hpp"
#include "redlock/redlock_backend.hpp"

namespace dlock::redlock {

namespace asio = boost::asio;
using detail::AcquireCall;
using detail::AcquireOutcome;
using detail::RedlockAcquire;
using detail::RedlockRound;
using detail::ReleaseCall;
using detail::ReleaseOutcome;
using detail::RenewCall;
using detail::RenewOutcome;
using detail::transient;
using Clock = std::chrono::steady_clock;

// One release is published on every node that held the lock; copies from
// different nodes arriving within this window count as one wake-up.
// Why Redlock refuses fair, shared and counted locks.
inline constexpr std::string_view kNoLines =
    "a line needs one place that orders waiters and hands the lock over inside a release; independent "
    "masters each keep their own line, and a majority vote cannot make one order of them (use a single "
    "master, or ZooKeeper)";

inline constexpr milliseconds kWakeWindow{100};
// How long connect() waits for each master's blocking connection.
inline constexpr milliseconds kOpenAheadPatience{200};

inline Status cancelled() { return {Errc::cancelled, "client closed"}; }

class RedlockBackend final : public detail::Backend {
 public:
  RedlockBackend(asio::io_context& io, std::vector<redis::ConnectionConfig> configs, std::string prefix,
                 milliseconds command_timeout)
      : io_(io),
        command_timeout_(command_timeout),
        quorum_(RedlockRound::quorum(configs.size())),
        up_(configs.size(), false) {
    for (std::size_t i = 0; i < configs.size(); ++i) {
      names_.push_back(configs[i].endpoint.describe());
      fast_ = fast_ && configs.size() <= 64;
      nodes_.push_back(redis::make_redlock_master(io, std::move(configs[i]), prefix));
      detail::BackendEvents events;
      events.released = [this, i](const detail::WatchKey& key) { on_node_wake(i, key.name); };
      events.resync = [this] {
        for (auto& [name, w] : watches_) w.recent.clear();
        if (events_.resync) events_.resync();
      };
      events.link = [this, i](bool up) { on_node_link(i, up); };
      nodes_[i]->set_events(std::move(events));
    }
  }

  ~RedlockBackend() override { close(); }

  // Fences come from node 0 alone: strictly increasing only while it answers.
  detail::Capabilities capabilities() const override {
    detail::Capabilities c;
    c.strict_fence = false;
    return c;
  }
  void set_events(detail::BackendEvents events) override { events_ = std::move(events); }

  // Up once a majority of the masters is: the first connection attempts'
  // failures are reported only when a majority is out of reach.
  void start(std::function<void(Status)> done) override {
    fan_out<bool, Status>(std::move(done), a_majority("connect"), [this](std::size_t i, auto answer) {
      nodes_[i]->start([this, i, answer = std::move(answer)](Status s) {
        answer(s.ok() ? Result<bool>(true) : Result<bool>(Status(s.code(), names_[i] + ": " + s.message())));
      });
    });
  }

  void close() override {
    closed_ = true;
    for (auto& w : timers_)
      if (auto t = w.lock()) t->cancel();
    timers_.clear();
    for (auto& n : nodes_) n->close();
  }

  void acquire(const AcquireCall& call, std::function<void(Result<AcquireOutcome>)> done) override;
  void release(const ReleaseCall& call, std::function<void(Result<ReleaseOutcome>)> done) override;
  std::optional<Result<AcquireOutcome>> acquire_now(const AcquireCall& call) override;
  std::optional<Result<ReleaseOutcome>> release_now(const ReleaseCall& call) override;
  // A blocking connection to each master ahead of the first call, each
  // given a short while only: a silent master must not hold up connect()
  // (its connection is opened by the first call that needs it).
  void open_blocking() override {
    if (!fast_) return;
    for (auto& n : nodes_) n->open_blocking_within(kOpenAheadPatience);
  }

  void abandon(const detail::AbandonCall& call, std::function<void(Status)> done) override {
    auto undo = detail::undo_of(call);
    if (!undo) return asio::post(io_, [done = std::move(done)] { done({}); });
    release(*undo, [done = std::move(done)](Result<ReleaseOutcome> r) { done(r.status()); });
  }
  void renew(const std::vector<RenewCall>& calls, std::function<void(Result<std::vector<RenewOutcome>>)> done) override;
  void inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) override;
  void names(const std::string& prefix, std::function<void(Result<std::vector<std::string>>)> done) override;

  // Confirmed on a majority is enough: the releaser's majority overlaps it.
  void watch(const detail::WatchKey& key, std::function<void(Status)> ready) override {
    ++watches_[key.name].refs;
    fan_out<bool, Status>(std::move(ready), a_majority("watch"), [this, key](std::size_t i, auto answer) {
      nodes_[i]->watch(
          key, [answer = std::move(answer)](Status s) { answer(s.ok() ? Result<bool>(true) : Result<bool>(s)); });
    });
  }

  void unwatch(const detail::WatchKey& key) override {
    auto it = watches_.find(key.name);
    if (it != watches_.end() && --it->second.refs == 0) watches_.erase(it);
    for (auto& n : nodes_) n->unwatch(key);
  }

  std::uint64_t commands_sent() const override {
    std::uint64_t sum = 0;
    for (const auto& n : nodes_) sum += n->commands_sent();
    return sum;
  }
  std::uint64_t reconnects() const override {
    std::uint64_t sum = 0;
    for (const auto& n : nodes_) sum += n->reconnects();
    return sum;
  }

 private:
  struct Attempt;
  struct Watch {
    unsigned refs = 0;
    struct Event {
      Clock::time_point at;
      std::vector<bool> seen;  // per node
    };
    std::deque<Event> recent;
  };

  // A FanOut over every master: `ask(i, answer)` sends the call to master
  // i, whose answer goes to `answer`. After close() the caller is answered
  // cancelled.
  template <class T, class Out>
  std::shared_ptr<FanOut<T, Out>> fan_out(std::function<void(Out)> done, typename FanOut<T, Out>::Decide decide,
                                          const std::function<void(std::size_t, std::function<void(Result<T>)>)>& ask) {
    auto f = std::make_shared<FanOut<T, Out>>(nodes_.size(), quorum_, std::move(done), std::move(decide));
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      ask(i, [this, f, i](Result<T> r) {
        if (closed_) return f->finish(cancelled());
        f->add(i, std::move(r));
      });
    return f;
  }

  std::shared_ptr<asio::steady_timer> make_timer(Clock::time_point at) {
    auto t = std::make_shared<asio::steady_timer>(io_, at);
    std::erase_if(timers_, [](const auto& w) { return w.expired(); });
    timers_.push_back(t);
    return t;
  }

  void apply(const std::shared_ptr<Attempt>& a, RedlockAcquire::Effects effects);
  void undo_now(std::size_t node, const ReleaseCall& call, std::uint64_t round, Clock::time_point by, bool answered);
  void settle_late(std::optional<std::uint64_t> grant);
  struct Late;
  void undo_when_answered(Late late);
  void leave_silent(std::vector<std::unique_ptr<redis::RedlockMaster::Pending>>& sent, const AcquireCall& call,
                    std::uint64_t round, Clock::time_point window_end, bool granted);
  static std::vector<std::size_t> readable(const std::vector<std::unique_ptr<redis::RedlockMaster::Pending>>& sent,
                                           Clock::time_point until);
  void each_master_sends(
      const std::function<redis::RedlockMaster::Sent(std::size_t, bool)>& send,
      const std::function<void(std::size_t, Result<std::unique_ptr<redis::RedlockMaster::Pending>>)>& sent);
  void report(const std::shared_ptr<Attempt>& a, Result<AcquireOutcome> r);
  // Done once a majority of the masters said ok, failed once it cannot be.
  static FanOut<bool, Status>::Decide a_majority(std::string_view what) {
    return [what](const detail::Quorum<bool>& q) -> std::optional<Status> {
      if (q.majority_ok()) return Status();
      if (q.majority_lost()) return q.failure(what);
      return std::nullopt;
    };
  }
  static std::optional<Result<ReleaseOutcome>> release_decision(const detail::Quorum<ReleaseOutcome>& q);
  static Result<LockInfo> merge_inspect(const detail::Quorum<LockInfo>& q);

  // A release published on N nodes reaches us N times: forward it once.
  void on_node_wake(std::size_t node, const std::string& name) {
    auto it = watches_.find(name);
    if (it == watches_.end()) return;
    auto& recent = it->second.recent;
    const auto now = Clock::now();
    while (!recent.empty() && now - recent.front().at > kWakeWindow) recent.pop_front();
    for (auto& e : recent) {
      if (!e.seen[node]) {
        e.seen[node] = true;  // another node's copy of a release already forwarded
        return;
      }
    }
    recent.push_back({now, std::vector<bool>(nodes_.size(), false)});
    recent.back().seen[node] = true;
    if (events_.released) events_.released({name, 0});
  }

  // Up while a majority of the command connections is up.
  void on_node_link(std::size_t node, bool up) {
    const bool before = up_count_ >= quorum_;
    if (up_[node] != up) {
      up_[node] = up;
      up ? ++up_count_ : --up_count_;
      const std::uint64_t bit = std::uint64_t{1} << (node % 64);
      up ? up_bits_.fetch_or(bit) : up_bits_.fetch_and(~bit);
    }
    const bool after = up_count_ >= quorum_;
    if (before != after && events_.link) events_.link(after);
  }

  asio::io_context& io_;
  milliseconds command_timeout_;
  std::size_t quorum_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<redis::RedlockMaster>> nodes_;
  std::vector<bool> up_;
  std::size_t up_count_ = 0;
  // up_ for other threads (the fast path), a bit per node.
  std::atomic<std::uint64_t> up_bits_{0};
  // Every master offers the blocking fast path (plain TCP).
  bool fast_ = true;
  // Acquires of fast rounds whose answers were not in yet, by node.
  struct Late {
    std::size_t node;
    std::uint64_t grant;
    Clock::time_point by;
    std::unique_ptr<redis::RedlockMaster::Pending> sent;
    std::optional<ReleaseCall> undo;  // a failed round's (undo_when_answered): where it granted after all
    std::uint64_t round = 0;          // the undo's
  };
  std::mutex late_mu_;
  std::vector<Late> late_;
  // Round numbers (redis::RedlockMaster::acquire_round): an undo that
  // arrives late names its round, so it cannot remove a later round's grant
  // (same owner, same grant id).
  std::atomic<std::uint64_t> rounds_{0};
  std::map<std::string, Watch> watches_;
  std::vector<std::weak_ptr<asio::steady_timer>> timers_;
  detail::BackendEvents events_;
  // Set by close(): node callbacks that still arrive deliver cancelled.
  bool closed_ = false;
};

// The undo of a round's acquire `c` on a master, sent with the round's
// number. Idempotent and owner-checked: held + 1 removes only the level this
// round added; where it was not applied, nothing is touched. No tombstone:
// the next round of the same acquire reuses the grant id (rounds tell them
// apart); the client leaves one when the acquire ends.
inline ReleaseCall undo_of_round(const AcquireCall& c) {
  ReleaseCall call{c.name, c.owner, c.held + 1, false};
  call.grant = c.grant;
  return call;
}

// A master's request that could not be sent: a handshake cut short by the
// round's time (timeout, for a single server) is this master's silence.
inline Status unsent(const Status& s) { return s.code() == Errc::timeout ? Status(Errc::unavailable, s.message()) : s; }

}  // namespace dlock::redlock

#endif  // DLOCK_REDLOCK_REDLOCK_BACKEND_IMPL_HPP_

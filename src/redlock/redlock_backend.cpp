#include "redlock/redlock_backend.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>

#include "core/quorum.hpp"
#include "core/redlock_round.hpp"
#include "core/token.hpp"
#include "core/transient.hpp"
#include "redis/redis_backend.hpp"
#include "redlock/redlock_acquire.hpp"

namespace dlock::redlock {

milliseconds per_node_timeout(milliseconds command_timeout, milliseconds lease) {
  return std::max(milliseconds(10), std::min(command_timeout, lease / 10));
}

namespace {

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
constexpr milliseconds kWakeWindow{100};
// How long connect() waits for each master's blocking connection.
constexpr milliseconds kOpenAheadPatience{200};

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
    struct Round {
      Round(std::size_t n, std::size_t q) : answers(n, q) {}
      detail::Quorum<bool> answers;
      std::function<void(Status)> done;
    };
    auto r = std::make_shared<Round>(nodes_.size(), quorum_);
    r->done = std::move(done);
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      nodes_[i]->start([this, r, i](Status s) {
        if (!r->done) return;
        r->answers.add(i, s.ok() ? Result<bool>(true) : Result<bool>(Status(s.code(), names_[i] + ": " + s.message())));
        if (r->answers.majority_ok())
          std::exchange(r->done, nullptr)({});
        else if (r->answers.majority_lost())
          std::exchange(r->done, nullptr)(r->answers.failure("connect"));
      });
    }
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
    struct Round {
      Round(std::size_t n, std::size_t q) : answers(n, q) {}
      detail::Quorum<bool> answers;
      std::function<void(Status)> ready;
    };
    auto r = std::make_shared<Round>(nodes_.size(), quorum_);
    r->ready = std::move(ready);
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      nodes_[i]->watch(key, [r, i](Status s) {
        if (!r->ready) return;
        r->answers.add(i, s.ok() ? Result<bool>(true) : Result<bool>(s));
        if (r->answers.majority_ok())
          std::exchange(r->ready, nullptr)({});
        else if (r->answers.majority_lost())
          std::exchange(r->ready, nullptr)(s);
      });
    }
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

  std::shared_ptr<asio::steady_timer> make_timer(Clock::time_point at) {
    auto t = std::make_shared<asio::steady_timer>(io_, at);
    std::erase_if(timers_, [](const auto& w) { return w.expired(); });
    timers_.push_back(t);
    return t;
  }

  void apply(const std::shared_ptr<Attempt>& a, RedlockAcquire::Effects effects);
  void undo_now(std::size_t node, const ReleaseCall& call, Clock::time_point by, bool answered);
  void settle_late(std::optional<std::uint64_t> grant);
  struct Late;
  void undo_when_answered(Late late);
  static std::vector<std::size_t> readable(const std::vector<std::unique_ptr<redis::RedlockMaster::Pending>>& sent,
                                           Clock::time_point until);
  void each_master_sends(
      const std::function<redis::RedlockMaster::Sent(std::size_t, bool)>& send,
      const std::function<void(std::size_t, Result<std::unique_ptr<redis::RedlockMaster::Pending>>)>& sent);
  void report(const std::shared_ptr<Attempt>& a, Result<AcquireOutcome> r);
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
  };
  std::mutex late_mu_;
  std::vector<Late> late_;
  // Attempt numbers (AcquireCall::round): an undo that arrives late names
  // its attempt, so it cannot remove a later attempt's grant (same owner).
  std::atomic<std::uint64_t> rounds_{0};
  std::map<std::string, Watch> watches_;
  std::vector<std::weak_ptr<asio::steady_timer>> timers_;
  detail::BackendEvents events_;
  // Set by close(): node callbacks that still arrive deliver cancelled.
  bool closed_ = false;
};

Status cancelled() { return {Errc::cancelled, "client closed"}; }

// The undo of round `c` on a master. Idempotent and owner-checked: held + 1
// removes only the level this round added; where it was not applied,
// nothing is touched. No tombstone: the next round of the same acquire
// reuses the grant id (rounds tell them apart); the client leaves one when
// the acquire ends.
ReleaseCall undo_of_round(const AcquireCall& c) {
  ReleaseCall call{c.name, c.owner, c.held + 1, false, c.round};
  call.grant = c.grant;
  return call;
}

// A master's request that could not be sent: a handshake cut short by the
// round's time (timeout, for a single server) is this master's silence.
Status unsent(const Status& s) { return s.code() == Errc::timeout ? Status(Errc::unavailable, s.message()) : s; }

// ---- acquire ---------------------------------------------------------------
// The decisions are RedlockAcquire's; this drives its I/O.

struct RedlockBackend::Attempt {
  Attempt(const AcquireCall& call, Clock::time_point start, milliseconds per_node, RedlockAcquire::Nodes nodes)
      : fsm(call, start, per_node, nodes, [] { return detail::random_u64(); }) {}
  RedlockAcquire fsm;
  std::shared_ptr<asio::steady_timer> timer;
  std::function<void(Result<AcquireOutcome>)> done;
};

void RedlockBackend::acquire(const AcquireCall& call, std::function<void(Result<AcquireOutcome>)> done) {
  if (Status bad = detail::check_mode(call, "Redlock", detail::kRedlockNoLines); !bad.ok())
    return asio::post(io_, [done = std::move(done), bad] { done(bad); });
  const auto start = Clock::now();  // before the first request: validity counts from here
  AcquireCall numbered = call;
  numbered.round = ++rounds_;
  auto a = std::make_shared<Attempt>(numbered, start, per_node_timeout(command_timeout_, call.lease),
                                     RedlockAcquire::Nodes{&names_, &up_});
  a->done = std::move(done);
  a->timer = make_timer(a->fsm.timer_at());
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i]->acquire(a->fsm.call(), [this, a, i](Result<AcquireOutcome> res) {
      if (closed_) return report(a, cancelled());
      apply(a, a->fsm.on_answer(i, res, Clock::now()));
    });
  }
  a->timer->async_wait([this, a](const boost::system::error_code& ec) {
    if (ec || closed_) return;
    apply(a, a->fsm.on_timer(Clock::now()));
  });
}

void RedlockBackend::apply(const std::shared_ptr<Attempt>& a, RedlockAcquire::Effects effects) {
  for (const auto& undo : effects.undo) {
    // Behind the acquire on the same connection, so it cannot overtake it.
    nodes_[undo.node]->release(undo_of_round(a->fsm.call()), [this, a, counted = undo.counted](Result<ReleaseOutcome>) {
      if (closed_) return report(a, cancelled());
      apply(a, a->fsm.on_undo_answer(counted));
    });
  }
  if (effects.report) report(a, std::move(*effects.report));
}

void RedlockBackend::report(const std::shared_ptr<Attempt>& a, Result<AcquireOutcome> r) {
  a->timer->cancel();
  if (a->done) std::exchange(a->done, nullptr)(std::move(r));
}

// ---- release ---------------------------------------------------------------

void RedlockBackend::release(const ReleaseCall& call, std::function<void(Result<ReleaseOutcome>)> done) {
  struct Round {
    Round(std::size_t n, std::size_t q) : answers(n, q) {}
    detail::Quorum<ReleaseOutcome> answers;
    std::function<void(Result<ReleaseOutcome>)> done;
  };
  auto r = std::make_shared<Round>(nodes_.size(), quorum_);
  r->done = std::move(done);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i]->release(call, [this, r, i](Result<ReleaseOutcome> res) {
      if (!r->done) return;
      if (closed_) return std::exchange(r->done, nullptr)(cancelled());
      r->answers.add(i, std::move(res));
      if (auto out = release_decision(r->answers)) std::exchange(r->done, nullptr)(std::move(*out));
    });
  }
}

// ---- the blocking fast path --------------------------------------------------
// On the caller's thread: the request written to every master, then the
// answers read as they come, so a round costs the slowest master's round
// trip.
// The decisions are RedlockAcquire's, as on the I/O thread.

std::optional<Result<AcquireOutcome>> RedlockBackend::acquire_now(const AcquireCall& call) {
  if (!fast_) return std::nullopt;
  if (Status bad = detail::check_mode(call, "Redlock", detail::kRedlockNoLines); !bad.ok())
    return Result<AcquireOutcome>(bad);
  settle_late(std::nullopt);
  const auto start = Clock::now();  // before the first request: validity counts from here
  AcquireCall numbered = call;
  numbered.round = rounds_.fetch_add(1) + 1;
  const std::uint64_t bits = up_bits_.load();
  std::vector<bool> connected(nodes_.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i) connected[i] = (bits >> i) & 1;
  const milliseconds per_node = per_node_timeout(command_timeout_, call.lease);
  RedlockAcquire fsm(numbered, start, per_node, RedlockAcquire::Nodes{&names_, &connected},
                     [] { return detail::random_u64(); });
  std::optional<Result<AcquireOutcome>> report;
  std::vector<bool> answered(nodes_.size(), false);  // the master replied (it is not silent)
  // Effects, and the effects their undos' answers have, in order.
  auto run = [&](RedlockAcquire::Effects first) {
    std::deque<RedlockAcquire::Effects> todo;
    todo.push_back(std::move(first));
    while (!todo.empty()) {
      RedlockAcquire::Effects e = std::move(todo.front());
      todo.pop_front();
      for (const auto& undo : e.undo) {
        undo_now(undo.node, undo_of_round(fsm.call()), Clock::now() + per_node, answered[undo.node]);
        todo.push_back(fsm.on_undo_answer(undo.counted));
      }
      if (e.report && !report) report = std::move(e.report);
    }
  };
  auto named = [&](std::size_t i, const Status& s) { return Status(s.code(), names_[i] + ": " + s.message()); };
  std::vector<std::unique_ptr<redis::RedlockMaster::Pending>> sent(nodes_.size());
  each_master_sends(
      [&](std::size_t i, bool pooled_only) {
        return nodes_[i]->send_acquire_now(fsm.call(), std::min(start + per_node, call.deadline), pooled_only);
      },
      [&](std::size_t i, Result<std::unique_ptr<redis::RedlockMaster::Pending>> s) {
        if (s.ok())
          sent[i] = std::move(s.value());
        else
          // Cut short by the caller's deadline: the call's timeout; by the
          // per-node window: this master's silence.
          run(fsm.on_answer(i, named(i, call.deadline <= start + per_node ? s.status() : unsent(s.status())),
                            Clock::now()));
      });
  // The answers in the order they come (a silent master must not hold up
  // the others'), until the round is decided or its timer is due.
  while (!report && std::any_of(sent.begin(), sent.end(), [](const auto& p) { return p != nullptr; })) {
    const auto ready = readable(sent, std::min(fsm.timer_at(), call.deadline));
    if (ready.empty() && Clock::now() >= call.deadline && call.deadline < fsm.timer_at()) {
      // The caller's time is up before the round's: the round is left in
      // doubt (the caller undoes this grant id); the silent masters' answers
      // are read later and undone where they granted.
      report = Result<AcquireOutcome>(
          Status(Errc::outcome_unknown, "Redlock: no majority answered within the call's deadline"));
      break;
    }
    if (ready.empty()) {
      run(fsm.on_timer(Clock::now()));
      continue;  // a decision, or the timer moved on (the fence's wait)
    }
    for (std::size_t i : ready) {
      auto answer = nodes_[i]->acquire_answer(*sent[i], std::min(fsm.timer_at(), call.deadline), true);
      sent[i].reset();
      answered[i] = answer.ok() || answer.code() != Errc::outcome_unknown;
      run(fsm.on_answer(i, answer.ok() ? answer : named(i, answer.status()), Clock::now()));
    }
  }
  if (!report) run(fsm.on_timer(Clock::now()));
  if (!report) report = Result<AcquireOutcome>(Status(Errc::outcome_unknown, "Redlock: the round did not decide"));
  // Masters still silent when the round was decided: their answers are read
  // later, before this grant's release goes to them (which keeps the two in
  // order there); a failed round's is undone where it granted.
  const bool granted = report->ok() && (*report)->kind == AcquireOutcome::Kind::granted;
  for (std::size_t i = 0; i < sent.size(); ++i)
    if (sent[i]) {
      Late late{i, call.grant, start + per_node, std::move(sent[i]), std::nullopt};
      if (granted) {
        std::lock_guard lk(late_mu_);
        late_.push_back(std::move(late));
        continue;
      }
      late.undo = undo_of_round(fsm.call());
      undo_when_answered(std::move(late));
    }
  return std::move(*report);
}

// A failed round's request still out on a master: the I/O thread waits for
// its answer (without blocking: it polls the socket) until the per-node
// deadline, then undoes it there if it granted or stayed in doubt. Its undo
// goes out behind the answer, so it cannot overtake the request.
void RedlockBackend::undo_when_answered(Late late) {
  struct Drain {
    Drain(asio::io_context& io, int fd) : socket(io, fd), timer(io) {}
    asio::posix::stream_descriptor socket;  // a dup of the connection's socket, to wait on
    asio::steady_timer timer;
    Late late;
    bool done = false;
  };
  const int fd = ::dup(late.sent->fd());
  if (fd < 0) {
    const std::size_t node = late.node;
    const ReleaseCall undo = *late.undo;
    return asio::post(io_, [this, node, undo] {
      if (!closed_) nodes_[node]->release(undo, [](Result<ReleaseOutcome>) {});
    });
  }
  // Closed here if the handler never runs (the client shut down first).
  auto owned = std::shared_ptr<int>(new int(fd), [](int* p) {
    if (*p >= 0) ::close(*p);
    delete p;
  });
  asio::post(io_, [this, owned, late = std::move(late)]() mutable {
    auto d = std::make_shared<Drain>(io_, std::exchange(*owned, -1));
    d->late = std::move(late);
    auto finish = [this, d](bool readable) {
      if (std::exchange(d->done, true)) return;
      d->timer.cancel();
      boost::system::error_code ignored;
      d->socket.cancel(ignored);
      // Readable: the answer is there (or the connection closed); else the
      // deadline passed and the read gives up at once.
      auto answer = nodes_[d->late.node]->acquire_answer(*d->late.sent,
                                                         readable ? Clock::now() + milliseconds(50) : Clock::now());
      const bool may_hold =
          answer.ok() ? answer->kind == AcquireOutcome::Kind::granted : answer.code() == Errc::outcome_unknown;
      if (may_hold && !closed_) nodes_[d->late.node]->release(*d->late.undo, [](Result<ReleaseOutcome>) {});
    };
    if (closed_) return;
    d->timer.expires_at(d->late.by);
    d->timer.async_wait([finish](const boost::system::error_code& ec) {
      if (!ec) finish(false);
    });
    d->socket.async_wait(asio::posix::stream_descriptor::wait_read, [finish](const boost::system::error_code& ec) {
      if (!ec) finish(true);
    });
  });
}

// Late answers of granted rounds (acquire_now): those of `grant`'s round
// read now, by their deadline; any other past its deadline read if it is
// there, else dropped with its connection (nullopt: only the latter). A
// failed round's late answers are the I/O thread's (undo_when_answered).
void RedlockBackend::settle_late(std::optional<std::uint64_t> grant) {
  std::vector<Late> due;
  const auto now = Clock::now();
  {
    std::lock_guard lk(late_mu_);
    if (late_.empty()) return;
    auto keep = std::partition(late_.begin(), late_.end(),
                               [&](const Late& l) { return !(l.by <= now || (grant && l.grant == *grant)); });
    std::move(keep, late_.end(), std::back_inserter(due));
    late_.erase(keep, late_.end());
  }
  for (Late& l : due) (void)nodes_[l.node]->acquire_answer(*l.sent, l.by);
}

// The pending masters whose sockets are readable, waiting for the first
// until `until`; empty once it has passed with none.
std::vector<std::size_t> RedlockBackend::readable(
    const std::vector<std::unique_ptr<redis::RedlockMaster::Pending>>& sent, Clock::time_point until) {
  std::vector<pollfd> fds;
  std::vector<std::size_t> who;
  for (std::size_t i = 0; i < sent.size(); ++i)
    if (sent[i]) {
      fds.push_back({sent[i]->fd(), POLLIN, 0});
      who.push_back(i);
    }
  std::vector<std::size_t> ready;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now()).count();
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(left, 0, 1 << 30)));
    if (n < 0 && errno == EINTR) continue;
    for (std::size_t k = 0; n > 0 && k < fds.size(); ++k)
      if (fds[k].revents != 0) ready.push_back(who[k]);
    return ready;
  }
}

// Sends to every master: first on the connections already open, then
// opening the others (a silent master's connect must not delay the rest),
// those the I/O thread is linked to first: a master gone from the network
// (its connect hangs until the round's window ends) is opened last, so it
// cannot use up the window of one that answers.
// `send(i, pooled_only)` as RedlockMaster's; `sent(i, result)` once each.
void RedlockBackend::each_master_sends(
    const std::function<redis::RedlockMaster::Sent(std::size_t, bool)>& send,
    const std::function<void(std::size_t, Result<std::unique_ptr<redis::RedlockMaster::Pending>>)>& sent) {
  std::vector<std::size_t> later;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    auto s = send(i, true);
    if (s)
      sent(i, std::move(*s));
    else
      later.push_back(i);
  }
  const std::uint64_t up = up_bits_.load();
  std::stable_partition(later.begin(), later.end(), [up](std::size_t i) { return ((up >> i) & 1) != 0; });
  for (std::size_t i : later) {
    auto s = send(i, false);
    sent(i, s ? std::move(*s)
              : Result<std::unique_ptr<redis::RedlockMaster::Pending>>(
                    Status(Errc::unavailable, "no blocking connection")));
  }
}

// An undo. To a master that just answered, from the caller's thread; to
// one that did not (silent, unreachable), or where no blocking call is
// offered, from the I/O thread, so a dead master cannot hold up the caller.
void RedlockBackend::undo_now(std::size_t node, const ReleaseCall& call, Clock::time_point by, bool answered) {
  if (answered)
    if (auto s = nodes_[node]->send_release_now(call, by, false); s && s->ok()) {
      (void)nodes_[node]->release_answer(*s->value(), by);
      return;
    }
  asio::post(io_, [this, node, call] {
    if (!closed_) nodes_[node]->release(call, [](Result<ReleaseOutcome>) {});
  });
}

std::optional<Result<ReleaseOutcome>> RedlockBackend::release_now(const ReleaseCall& call) {
  if (!fast_) return std::nullopt;
  settle_late(call.grant);
  detail::Quorum<ReleaseOutcome> answers(nodes_.size(), quorum_);
  std::vector<std::unique_ptr<redis::RedlockMaster::Pending>> sent(nodes_.size());
  // Every answer is read (the connections go back clean); each by the
  // command timeout from the first send, as on the I/O thread.
  const auto by = Clock::now() + command_timeout_;
  each_master_sends([&](std::size_t i, bool pooled_only) { return nodes_[i]->send_release_now(call, by, pooled_only); },
                    [&](std::size_t i, Result<std::unique_ptr<redis::RedlockMaster::Pending>> s) {
                      if (s.ok())
                        sent[i] = std::move(s.value());
                      else
                        answers.add(i, Result<ReleaseOutcome>(unsent(s.status())));
                    });
  while (std::any_of(sent.begin(), sent.end(), [](const auto& p) { return p != nullptr; })) {
    auto ready = readable(sent, by);
    const bool late = ready.empty();  // past `by`: the rest give up at once
    if (late)
      for (std::size_t i = 0; i < sent.size(); ++i)
        if (sent[i]) ready.push_back(i);
    for (std::size_t i : ready) {
      answers.add(i, nodes_[i]->release_answer(*sent[i], by, !late));
      sent[i].reset();
    }
  }
  if (auto out = release_decision(answers)) return std::move(*out);
  return Result<ReleaseOutcome>(answers.failure("release"));
}

// Decided as soon as one answer has a majority; nullopt while it may still.
std::optional<Result<ReleaseOutcome>> RedlockBackend::release_decision(const detail::Quorum<ReleaseOutcome>& q) {
  using Kind = ReleaseOutcome::Kind;
  for (Kind kind : {Kind::released, Kind::not_held, Kind::not_owner, Kind::mismatch}) {
    if (q.count([kind](const ReleaseOutcome& a) { return a.kind == kind; }) < q.quorum()) continue;
    ReleaseOutcome out;
    out.kind = kind;
    if (kind == Kind::released) {
      // The depth most of the releasing nodes report (ties: the lower).
      std::map<unsigned, std::size_t> depths;
      for (const auto& a : q.answers())
        if (a && a->kind == kind) ++depths[a->depth];
      std::size_t best = 0;
      for (auto [d, c] : depths)
        if (c > best) best = c, out.depth = d;
    }
    return out;
  }
  if (!q.complete()) return std::nullopt;
  if (!q.majority_ok()) return Result<ReleaseOutcome>(q.failure("release"));
  // No common answer: the lock was not held on a majority.
  ReleaseOutcome out;
  out.kind = Kind::not_held;
  return out;
}

// ---- renew -----------------------------------------------------------------

void RedlockBackend::renew(const std::vector<RenewCall>& calls,
                           std::function<void(Result<std::vector<RenewOutcome>>)> done) {
  struct Round {
    Round(std::size_t n, std::size_t q) : answers(n, q) {}
    detail::Quorum<std::vector<RenewOutcome>> answers;
    std::function<void(Result<std::vector<RenewOutcome>>)> done;
    std::shared_ptr<asio::steady_timer> timer;
  };
  auto r = std::make_shared<Round>(nodes_.size(), quorum_);
  r->done = std::move(done);
  milliseconds lease = calls.empty() ? command_timeout_ : calls.front().lease;
  for (const auto& c : calls) lease = std::min(lease, c.lease);
  r->timer = make_timer(Clock::now() + per_node_timeout(command_timeout_, lease));
  const std::size_t count = calls.size();
  // Per lease: extended only where a majority extended it.
  auto finish = [r, count] {
    if (!r->done) return;
    r->timer->cancel();
    const auto& q = r->answers;
    if (!q.majority_ok()) return std::exchange(r->done, nullptr)(q.failure("renewal"));
    std::vector<RenewOutcome> out(count, RenewOutcome::expired);
    for (std::size_t k = 0; k < count; ++k) {
      for (RenewOutcome o : {RenewOutcome::renewed, RenewOutcome::taken, RenewOutcome::wrong_type}) {
        if (q.count([k, o](const std::vector<RenewOutcome>& a) { return a[k] == o; }) >= q.quorum()) {
          out[k] = o;
          break;
        }
      }
    }
    std::exchange(r->done, nullptr)(std::move(out));
  };
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i]->renew(calls, [this, r, i, finish](Result<std::vector<RenewOutcome>> res) {
      if (!r->done) return;
      if (closed_) return std::exchange(r->done, nullptr)(cancelled());
      r->answers.add(i, std::move(res));
      if (r->answers.complete()) finish();
    });
  }
  r->timer->async_wait([this, r, finish](const boost::system::error_code& ec) {
    if (ec || closed_ || !r->done) return;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      r->answers.add(i, Status(Errc::outcome_unknown, names_[i] + " did not answer the renewal in time"));
    finish();
  });
}

// ---- inspect ---------------------------------------------------------------

// Every master's names: a lock held on a majority is named by at least
// one master that answers while a majority does.
void RedlockBackend::names(const std::string& prefix, std::function<void(Result<std::vector<std::string>>)> done) {
  struct Round {
    Round(std::size_t n, std::size_t q) : answers(n, q) {}
    detail::Quorum<std::vector<std::string>> answers;
    std::function<void(Result<std::vector<std::string>>)> done;
  };
  auto r = std::make_shared<Round>(nodes_.size(), quorum_);
  r->done = std::move(done);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i]->names(prefix, [this, r, i](Result<std::vector<std::string>> res) {
      if (!r->done) return;
      if (closed_) return std::exchange(r->done, nullptr)(cancelled());
      r->answers.add(i, std::move(res));
      if (!r->answers.complete()) return;
      if (!r->answers.majority_ok()) return std::exchange(r->done, nullptr)(r->answers.failure("list"));
      std::vector<std::string> all;
      for (const auto& a : r->answers.answers())
        if (a) all.insert(all.end(), a->begin(), a->end());
      std::exchange(r->done, nullptr)(std::move(all));
    });
  }
}

void RedlockBackend::inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) {
  struct Round {
    Round(std::size_t n, std::size_t q) : answers(n, q) {}
    detail::Quorum<LockInfo> answers;
    std::function<void(Result<LockInfo>)> done;
  };
  auto r = std::make_shared<Round>(nodes_.size(), quorum_);
  r->done = std::move(done);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i]->inspect(name, [this, r, i](Result<LockInfo> res) {
      if (!r->done) return;
      if (closed_) return std::exchange(r->done, nullptr)(cancelled());
      r->answers.add(i, std::move(res));
      if (r->answers.complete()) std::exchange(r->done, nullptr)(merge_inspect(r->answers));
    });
  }
}

// Held while a majority holds it, for as long as a majority keeps it.
Result<LockInfo> RedlockBackend::merge_inspect(const detail::Quorum<LockInfo>& q) {
  if (!q.majority_ok()) return q.failure("inspect");
  LockInfo out;
  std::vector<milliseconds> remaining;
  for (const auto& info : q.answers()) {
    if (!info) continue;
    out.waiters = std::max(out.waiters, info->waiters);
    if (!info->held) continue;
    remaining.push_back(info->remaining);
    if (out.holder.empty()) out.holder = info->holder;  // one grant wrote the same on each master
    if (info->held_for) out.held_for = std::max(out.held_for.value_or(milliseconds(0)), *info->held_for);
    out.reentry_count = out.reentry_count == 0 ? info->reentry_count : std::min(out.reentry_count, info->reentry_count);
  }
  const auto& node0 = q.answer(0);
  if (node0) out.last_fence = node0->last_fence;
  if (remaining.size() >= q.quorum()) {
    out.held = true;
    std::sort(remaining.begin(), remaining.end(), std::greater<>());
    out.remaining = remaining[q.quorum() - 1];
    if (node0 && node0->held) out.fence = node0->fence;
  } else {
    out.reentry_count = 0;
    out.holder.clear();
    out.held_for.reset();
  }
  return out;
}

}  // namespace

std::unique_ptr<detail::Backend> make_redlock_backend(asio::io_context& io, std::vector<redis::ConnectionConfig> nodes,
                                                      std::string key_prefix, milliseconds command_timeout) {
  return std::make_unique<RedlockBackend>(io, std::move(nodes), std::move(key_prefix), command_timeout);
}

}  // namespace dlock::redlock

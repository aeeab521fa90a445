#include "redlock/redlock_backend.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>

#include "core/redlock_round.hpp"
#include "core/transient.hpp"
#include "core/token.hpp"
#include "redis/redis_backend.hpp"

namespace dlock::redlock {

milliseconds per_node_timeout(milliseconds command_timeout, milliseconds lease) {
  return std::max(milliseconds(10), std::min(command_timeout, lease / 10));
}

namespace {

namespace asio = boost::asio;
using detail::AcquireCall;
using detail::AcquireOutcome;
using detail::RedlockRound;
using detail::ReleaseCall;
using detail::ReleaseOutcome;
using detail::RenewCall;
using detail::transient;
using detail::RenewOutcome;
using Clock = std::chrono::steady_clock;

// After a split vote nobody holds a majority: retry after a short random
// delay (so competing clients fall out of step), not after a holder's TTL.
constexpr milliseconds kSplitRetryMax{50};
// One release is published on every node that held the lock; copies from
// different nodes arriving within this window count as one wake-up.
constexpr milliseconds kWakeWindow{100};


milliseconds random_delay(milliseconds max) {
  const auto span = static_cast<std::uint64_t>(std::max<std::int64_t>(max.count(), 1));
  return milliseconds(1 + static_cast<std::int64_t>(detail::random_u64() % span));
}

class RedlockBackend final : public detail::Backend {
 public:
  RedlockBackend(asio::io_context& io, std::vector<redis::ConnectionConfig> configs, std::string prefix,
                 milliseconds command_timeout)
      : io_(io), command_timeout_(command_timeout), quorum_(RedlockRound::quorum(configs.size())),
        up_(configs.size(), false) {
    for (std::size_t i = 0; i < configs.size(); ++i) {
      names_.push_back(configs[i].endpoint.describe());
      nodes_.push_back(redis::make_redis_backend(io, std::move(configs[i]), prefix));
      detail::BackendEvents events;
      events.released = [this, i](const std::string& name) { on_node_wake(i, name); };
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

  void start(std::function<void(Status)> done) override {
    struct Start {
      std::function<void(Status)> done;
      std::size_t ok = 0, failed = 0;
      std::string errors;
      Errc code = Errc::unavailable;
    };
    auto st = std::make_shared<Start>();
    st->done = std::move(done);
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      nodes_[i]->start([this, st, i](Status s) {
        if (!st->done) return;
        if (s.ok()) {
          if (++st->ok >= quorum_) std::exchange(st->done, nullptr)({});
          return;
        }
        if (st->failed++ == 0) st->code = s.code();
        st->errors += (st->errors.empty() ? "" : "; ") + names_[i] + ": " + s.message();
        if (nodes_.size() - st->failed < quorum_)
          std::exchange(st->done, nullptr)(Status(st->code, "Redlock: cannot reach a majority of the " +
                                                                std::to_string(nodes_.size()) +
                                                                " masters (" + st->errors + ")"));
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
  void abandon(const detail::AbandonCall& call, std::function<void(Status)> done) override {
    auto undo = detail::undo_of(call);
    if (!undo) return asio::post(io_, [done = std::move(done)] { done({}); });
    release(*undo, [done = std::move(done)](Result<ReleaseOutcome> r) { done(r.status()); });
  }
  void renew(const std::vector<RenewCall>& calls,
             std::function<void(Result<std::vector<RenewOutcome>>)> done) override;
  void inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) override;

  void watch(const detail::WatchKey& key, std::function<void(Status)> ready) override {
    ++watches_[key.name].refs;
    struct Agg {
      std::function<void(Status)> ready;
      std::size_t ok = 0, failed = 0;
    };
    auto agg = std::make_shared<Agg>(Agg{std::move(ready)});
    // Confirmed on a majority is enough: the releaser's majority overlaps it.
    for (auto& n : nodes_) {
      n->watch(key, [this, agg](Status s) {
        if (!agg->ready) return;
        if (s.ok() ? ++agg->ok >= quorum_ : nodes_.size() - ++agg->failed < quorum_)
          std::exchange(agg->ready, nullptr)(s);
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
  struct AcquireRound;
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

  void decide_acquire(const std::shared_ptr<AcquireRound>& r, Clock::time_point now);
  void deliver_grant(const std::shared_ptr<AcquireRound>& r);
  void undo_on_node(const std::shared_ptr<AcquireRound>& r, std::size_t i, bool wait);
  Result<AcquireOutcome> failure(const AcquireRound& r) const;
  Status no_majority(const std::vector<Status>& errors, std::size_t answered, std::string_view what) const;

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
    if (events_.released) events_.released(name);
  }

  // Up while a majority of the command connections is up.
  void on_node_link(std::size_t node, bool up) {
    const bool before = up_count_ >= quorum_;
    if (up_[node] != up) {
      up_[node] = up;
      up ? ++up_count_ : --up_count_;
    }
    const bool after = up_count_ >= quorum_;
    if (before != after && events_.link) events_.link(after);
  }

  asio::io_context& io_;
  milliseconds command_timeout_;
  std::size_t quorum_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<detail::Backend>> nodes_;
  std::vector<bool> up_;
  std::size_t up_count_ = 0;
  // Attempt numbers (AcquireCall::round): an undo that arrives late names
  // its attempt, so it cannot remove a later attempt's grant (same owner).
  std::uint64_t rounds_ = 0;
  std::map<std::string, Watch> watches_;
  std::vector<std::weak_ptr<asio::steady_timer>> timers_;
  detail::BackendEvents events_;
  // Set by close(): node callbacks that still arrive deliver cancelled.
  bool closed_ = false;
};

Status cancelled() { return {Errc::cancelled, "client closed"}; }

// ---- acquire ---------------------------------------------------------------

struct RedlockBackend::AcquireRound {
  enum class Vote { pending, granted, busy, lost, mismatch, error };
  // voting -> (granted: waiting for node 0's fence) -> done
  //        -> (failed: undoing on the nodes that may have granted) -> done
  enum class Phase { voting, fence_wait, undoing, done };
  AcquireRound(std::size_t n, const AcquireCall& c, Clock::time_point start)
      : call(c), round(n, c.lease, start), votes(n, Vote::pending), replied(n, false), outcomes(n), errors(n) {}
  AcquireCall call;
  RedlockRound round;
  Phase phase = Phase::voting;
  std::vector<Vote> votes;
  std::vector<bool> replied;  // the node's own callback has run
  std::vector<AcquireOutcome> outcomes;
  std::vector<Status> errors;
  std::shared_ptr<asio::steady_timer> timer;
  std::function<void(Result<AcquireOutcome>)> done;
  std::optional<Result<AcquireOutcome>> report;  // a failure, sent once the undo is answered
  std::size_t undo_waiting = 0;
  bool timed_out = false;  // the per-node timeout passed

  void deliver(Result<AcquireOutcome> r) {
    phase = Phase::done;
    if (timer) timer->cancel();
    if (done) std::exchange(done, nullptr)(std::move(r));
  }
  // A script's definite "no" wrote nothing on that node.
  bool wrote_nothing(std::size_t i) const {
    return votes[i] == Vote::busy || votes[i] == Vote::lost || votes[i] == Vote::mismatch ||
           (votes[i] == Vote::error && !transient(errors[i].code()) && replied[i]);
  }
};

void RedlockBackend::acquire(const AcquireCall& call, std::function<void(Result<AcquireOutcome>)> done) {
  if (Status bad = detail::check_mode(call, "Redlock"); !bad.ok())
    return asio::post(io_, [done = std::move(done), bad] { done(bad); });
  const auto start = Clock::now();  // before the first request: validity counts from here
  auto r = std::make_shared<AcquireRound>(nodes_.size(), call, start);
  r->call.round = ++rounds_;
  r->done = std::move(done);
  const auto per_node = per_node_timeout(command_timeout_, call.lease);
  r->timer = make_timer(std::min(start + per_node, r->round.deadline()));
  using Phase = AcquireRound::Phase;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i]->acquire(r->call, [this, r, i](Result<AcquireOutcome> res) {
      if (closed_) return r->deliver(cancelled());
      r->replied[i] = true;
      using Vote = AcquireRound::Vote;
      if (r->votes[i] == Vote::pending) {
        if (!res.ok()) {
          r->votes[i] = Vote::error;
          r->errors[i] = res.status();
        } else {
          r->outcomes[i] = *res;
          switch (res->kind) {
            case AcquireOutcome::Kind::granted: r->votes[i] = Vote::granted; break;
            case AcquireOutcome::Kind::busy: r->votes[i] = Vote::busy; break;
            case AcquireOutcome::Kind::lost: r->votes[i] = Vote::lost; break;
            case AcquireOutcome::Kind::mismatch: r->votes[i] = Vote::mismatch; break;
          }
        }
      }
      switch (r->phase) {
        case Phase::voting: {
          const auto now = Clock::now();
          r->round.vote(i, r->votes[i] == Vote::granted, now);
          return decide_acquire(r, now);
        }
        case Phase::fence_wait:
          if (i == 0) deliver_grant(r);
          return;
        case Phase::undoing:
        case Phase::done:
          // After a failure, undo what this answer may have granted; behind
          // the acquire on the same connection, so it cannot overtake it.
          if (r->round.decision() == RedlockRound::Decision::failed && (!res.ok() || res->kind == AcquireOutcome::Kind::granted))
            undo_on_node(r, i, r->phase == Phase::undoing && !r->timed_out);
          else if (r->phase == Phase::undoing && !r->timed_out && --r->undo_waiting == 0)
            r->deliver(std::move(*r->report));
          return;
      }
    });
  }
  r->timer->async_wait([this, r, per_node](const boost::system::error_code& ec) {
    if (ec || closed_) return;
    r->timed_out = true;
    switch (r->phase) {
      case Phase::voting: {
        const auto now = Clock::now();
        for (std::size_t i = 0; i < r->votes.size(); ++i) {
          if (r->votes[i] != AcquireRound::Vote::pending) continue;
          r->votes[i] = AcquireRound::Vote::error;
          // A node we are not connected to most likely never got the request.
          r->errors[i] = up_[i] ? Status(Errc::outcome_unknown, names_[i] + " did not answer within " +
                                                                    std::to_string(per_node.count()) + " ms")
                                : Status(Errc::unavailable, names_[i] + " is not connected");
          r->round.vote(i, false, now);
        }
        return decide_acquire(r, now);
      }
      case Phase::fence_wait: return deliver_grant(r);   // without node 0's fence
      case Phase::undoing: return r->deliver(std::move(*r->report));  // silent nodes are undone if they answer
      case Phase::done: return;
    }
  });
}

void RedlockBackend::deliver_grant(const std::shared_ptr<AcquireRound>& r) {
  using Vote = AcquireRound::Vote;
  AcquireOutcome out;
  out.kind = AcquireOutcome::Kind::granted;
  out.depth = 0;
  for (std::size_t i = 0; i < r->votes.size(); ++i)
    if (r->votes[i] == Vote::granted && (out.depth == 0 || r->outcomes[i].depth < out.depth))
      out.depth = r->outcomes[i].depth;
  // The designated fence node: node 0's counter, only if it granted too.
  out.fence = r->votes[0] == Vote::granted ? r->outcomes[0].fence : 0;
  r->deliver(out);
}

void RedlockBackend::decide_acquire(const std::shared_ptr<AcquireRound>& r, Clock::time_point now) {
  const auto decision = r->round.check(now);
  if (decision == RedlockRound::Decision::pending) return;
  using Vote = AcquireRound::Vote;
  if (decision == RedlockRound::Decision::granted) {
    // Node 0 carries the fence: give a connected node 0 until the per-node
    // timeout to answer, so a healthy cluster hands out fences.
    if (r->votes[0] == Vote::pending && up_[0] && !r->timed_out) {
      r->phase = AcquireRound::Phase::fence_wait;
      return;
    }
    return deliver_grant(r);
  }
  r->report = failure(*r);
  // Undo on every node that may have applied the call, and report once they
  // confirm (silent ones until the per-node timeout), so a failed acquire
  // leaves nothing behind. A node still silent is undone when its answer
  // arrives, which keeps the undo behind the acquire on that connection.
  r->phase = AcquireRound::Phase::undoing;
  std::vector<std::size_t> now_undo;
  r->undo_waiting = 0;
  for (std::size_t i = 0; i < r->votes.size(); ++i) {
    if (r->wrote_nothing(i)) continue;
    if (r->replied[i]) now_undo.push_back(i);
    if (r->replied[i] || !r->timed_out) ++r->undo_waiting;
  }
  if (r->undo_waiting == 0) return r->deliver(std::move(*r->report));
  for (std::size_t i : now_undo) undo_on_node(r, i, true);
}

void RedlockBackend::undo_on_node(const std::shared_ptr<AcquireRound>& r, std::size_t i, bool wait) {
  // Idempotent and owner-checked: held + 1 removes only the level this call
  // added; where it was not applied, nothing is touched.
  ReleaseCall undo{r->call.name, r->call.owner, r->call.held + 1, false, r->call.round};
  // No tombstone: the next round of the same acquire reuses the grant id
  // (rounds tell them apart); the client leaves one when the acquire ends.
  undo.grant = r->call.grant;
  nodes_[i]->release(undo, [this, r, wait](Result<ReleaseOutcome>) {
    if (closed_) return r->deliver(cancelled());
    if (wait && r->phase == AcquireRound::Phase::undoing && --r->undo_waiting == 0)
      r->deliver(std::move(*r->report));
  });
}

Result<AcquireOutcome> RedlockBackend::failure(const AcquireRound& r) const {
  using Vote = AcquireRound::Vote;
  std::size_t granted = 0, busy = 0, lost = 0, mismatch = 0, errors = 0;
  milliseconds min_ttl{-2};  // the shortest holder lease among the busy votes
  bool no_expiry = false;
  std::vector<Status> errs;
  for (std::size_t i = 0; i < r.votes.size(); ++i) {
    switch (r.votes[i]) {
      case Vote::granted: ++granted; break;
      case Vote::busy: {
        ++busy;
        const auto& hint = r.outcomes[i].hint;
        const auto ttl = hint.after;
        if (hint.kind == detail::WaitHint::Kind::expiry && ttl.count() > 0 &&
            (min_ttl.count() <= 0 || ttl < min_ttl))
          min_ttl = ttl;
        if (hint.kind == detail::WaitHint::Kind::event) no_expiry = true;
        break;
      }
      case Vote::lost: ++lost; break;
      case Vote::mismatch: ++mismatch; break;
      case Vote::error:
        ++errors;
        errs.push_back(r.errors[i]);
        break;
      case Vote::pending: break;
    }
  }
  const std::size_t q = quorum_;
  AcquireOutcome out;
  // A re-entry whose hold is gone (or taken) on a majority is lost.
  if (lost >= q || (r.call.held > 0 && lost + busy >= q)) {
    out.kind = AcquireOutcome::Kind::lost;
    return out;
  }
  if (mismatch >= q) {
    out.kind = AcquireOutcome::Kind::mismatch;
    out.depth = r.call.held;
    return out;
  }
  if (granted >= q)
    return Status(Errc::unavailable, "Redlock: a majority granted the lock only after its validity (lease " +
                                         std::to_string(r.call.lease.count()) + " ms) ran out; it was released");
  if (errors >= q) return no_majority(errs, r.votes.size() - errors, "acquire");
  out.kind = AcquireOutcome::Kind::busy;
  if (busy >= q) {
    out.hint = min_ttl.count() > 0 ? detail::WaitHint::expiry(min_ttl)
               : no_expiry         ? detail::WaitHint::event()
                                   : detail::WaitHint::retry(random_delay(kSplitRetryMax));
  } else {
    // Split vote, or too few answers: nobody may hold a majority.
    out.hint = detail::WaitHint::retry(
        random_delay(min_ttl.count() > 0 ? std::min(min_ttl, kSplitRetryMax) : kSplitRetryMax));
  }
  return out;
}

// The error when fewer than a majority answered: a permanent one (auth, ACL,
// wrong type) as it is; else outcome_unknown if any node may have applied
// the call, unavailable otherwise.
Status RedlockBackend::no_majority(const std::vector<Status>& errors, std::size_t answered,
                                   std::string_view what) const {
  std::string detail;
  bool unknown = false;
  for (const Status& e : errors) {
    if (!transient(e.code()))
      return Status(e.code(), "Redlock " + std::string(what) + ": " + e.message());
    unknown = unknown || e.code() == Errc::outcome_unknown;
    detail += (detail.empty() ? "" : "; ") + e.message();
  }
  return Status(unknown ? Errc::outcome_unknown : Errc::unavailable,
                "Redlock " + std::string(what) + ": only " + std::to_string(answered) + " of " +
                    std::to_string(nodes_.size()) + " masters answered, " + std::to_string(quorum_) +
                    " needed (" + detail + ")");
}

// ---- release ---------------------------------------------------------------

void RedlockBackend::release(const ReleaseCall& call, std::function<void(Result<ReleaseOutcome>)> done) {
  struct Round {
    std::function<void(Result<ReleaseOutcome>)> done;
    std::vector<ReleaseOutcome> answers;
    std::vector<Status> errors;
  };
  auto r = std::make_shared<Round>();
  r->done = std::move(done);
  const std::size_t n = nodes_.size();
  for (auto& node : nodes_) {
    node->release(call, [this, r, n](Result<ReleaseOutcome> res) {
      if (!r->done) return;
      if (closed_) return std::exchange(r->done, nullptr)(cancelled());
      if (res.ok()) r->answers.push_back(*res);
      else r->errors.push_back(res.status());
      // Decide as soon as one answer has a majority.
      std::map<ReleaseOutcome::Kind, std::size_t> kinds;
      for (const auto& a : r->answers) ++kinds[a.kind];
      for (auto [kind, count] : kinds) {
        if (count < quorum_) continue;
        ReleaseOutcome out;
        out.kind = kind;
        if (kind == ReleaseOutcome::Kind::released) {
          // The depth most of the releasing nodes report (ties: the lower).
          std::map<unsigned, std::size_t> depths;
          for (const auto& a : r->answers)
            if (a.kind == kind) ++depths[a.depth];
          std::size_t best = 0;
          for (auto [d, c] : depths)
            if (c > best) best = c, out.depth = d;
        }
        return std::exchange(r->done, nullptr)(out);
      }
      if (r->answers.size() + r->errors.size() < n) return;
      if (r->answers.size() < quorum_)
        return std::exchange(r->done, nullptr)(no_majority(r->errors, r->answers.size(), "release"));
      // No common answer: the lock was not held on a majority.
      ReleaseOutcome out;
      out.kind = ReleaseOutcome::Kind::not_held;
      std::exchange(r->done, nullptr)(out);
    });
  }
}

// ---- renew -----------------------------------------------------------------

void RedlockBackend::renew(const std::vector<RenewCall>& calls,
                           std::function<void(Result<std::vector<RenewOutcome>>)> done) {
  struct Round {
    std::function<void(Result<std::vector<RenewOutcome>>)> done;
    std::vector<std::vector<RenewOutcome>> answers;
    std::vector<Status> errors;
    std::size_t waiting = 0;
    std::shared_ptr<asio::steady_timer> timer;
  };
  auto r = std::make_shared<Round>();
  r->done = std::move(done);
  r->waiting = nodes_.size();
  milliseconds lease = calls.empty() ? command_timeout_ : calls.front().lease;
  for (const auto& c : calls) lease = std::min(lease, c.lease);
  r->timer = make_timer(Clock::now() + per_node_timeout(command_timeout_, lease));
  const std::size_t count = calls.size();
  auto finish = [this, r, count] {
    if (!r->done) return;
    r->timer->cancel();
    if (r->answers.size() < quorum_)
      return std::exchange(r->done, nullptr)(no_majority(r->errors, r->answers.size(), "renewal"));
    // Per lease: extended only where a majority extended it.
    std::vector<RenewOutcome> out(count, RenewOutcome::expired);
    for (std::size_t k = 0; k < count; ++k) {
      std::size_t renewed = 0, taken = 0, wrong = 0;
      for (const auto& a : r->answers) {
        renewed += a[k] == RenewOutcome::renewed;
        taken += a[k] == RenewOutcome::taken;
        wrong += a[k] == RenewOutcome::wrong_type;
      }
      if (renewed >= quorum_) out[k] = RenewOutcome::renewed;
      else if (taken >= quorum_) out[k] = RenewOutcome::taken;
      else if (wrong >= quorum_) out[k] = RenewOutcome::wrong_type;
    }
    std::exchange(r->done, nullptr)(std::move(out));
  };
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i]->renew(calls, [this, r, finish](Result<std::vector<RenewOutcome>> res) {
      if (!r->done) return;
      if (closed_) return std::exchange(r->done, nullptr)(cancelled());
      if (res.ok()) r->answers.push_back(std::move(*res));
      else r->errors.push_back(res.status());
      if (--r->waiting == 0) finish();
    });
  }
  r->timer->async_wait([this, r, finish](const boost::system::error_code& ec) {
    if (ec || closed_ || !r->done) return;
    for (std::size_t k = r->answers.size() + r->errors.size(); k < nodes_.size(); ++k)
      r->errors.push_back(Status(Errc::outcome_unknown, "a master did not answer the renewal in time"));
    finish();
  });
}

// ---- inspect ---------------------------------------------------------------

void RedlockBackend::inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) {
  struct Round {
    std::function<void(Result<LockInfo>)> done;
    std::vector<std::optional<LockInfo>> infos;
    std::vector<Status> errors;
    std::size_t waiting = 0;
  };
  auto r = std::make_shared<Round>();
  r->done = std::move(done);
  r->infos.resize(nodes_.size());
  r->waiting = nodes_.size();
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i]->inspect(name, [this, r, i](Result<LockInfo> res) {
      if (!r->done) return;
      if (closed_) return std::exchange(r->done, nullptr)(cancelled());
      if (res.ok()) r->infos[i] = *res;
      else r->errors.push_back(res.status());
      if (--r->waiting > 0) return;
      const std::size_t answered = r->infos.size() - r->errors.size();
      if (answered < quorum_) return std::exchange(r->done, nullptr)(no_majority(r->errors, answered, "inspect"));
      LockInfo out;
      std::vector<milliseconds> remaining;
      for (const auto& info : r->infos) {
        if (!info) continue;
        out.waiters = std::max(out.waiters, info->waiters);
        if (!info->held) continue;
        remaining.push_back(info->remaining);
        out.reentry_count = out.reentry_count == 0 ? info->reentry_count
                                                   : std::min(out.reentry_count, info->reentry_count);
      }
      if (r->infos[0]) out.last_fence = r->infos[0]->last_fence;
      if (remaining.size() >= quorum_) {
        out.held = true;
        // Held until fewer than a majority keep it.
        std::sort(remaining.begin(), remaining.end(), std::greater<>());
        out.remaining = remaining[quorum_ - 1];
        if (r->infos[0] && r->infos[0]->held) out.fence = r->infos[0]->fence;
      } else {
        out.reentry_count = 0;
      }
      std::exchange(r->done, nullptr)(out);
    });
  }
}

}  // namespace

std::unique_ptr<detail::Backend> make_redlock_backend(asio::io_context& io,
                                                      std::vector<redis::ConnectionConfig> nodes,
                                                      std::string key_prefix, milliseconds command_timeout) {
  return std::make_unique<RedlockBackend>(io, std::move(nodes), std::move(key_prefix), command_timeout);
}

}  // namespace dlock::redlock

#include <algorithm>

#include "redlock/redlock_backend_impl.hpp"

namespace dlock::redlock {

milliseconds per_node_timeout(milliseconds command_timeout, milliseconds lease) {
  return std::max(milliseconds(10), std::min(command_timeout, lease / 10));
}

// ---- acquire ---------------------------------------------------------------
// The decisions are RedlockAcquire's; this drives its I/O.

struct RedlockBackend::Attempt {
  Attempt(const AcquireCall& call, Clock::time_point start, milliseconds per_node, RedlockAcquire::Nodes nodes)
      : fsm(call, start, per_node, nodes, [] { return detail::random_u64(); }) {}
  RedlockAcquire fsm;
  std::uint64_t round = 0;  // this round's number on every master
  std::shared_ptr<asio::steady_timer> timer;
  std::function<void(Result<AcquireOutcome>)> done;
};

void RedlockBackend::acquire(const AcquireCall& call, std::function<void(Result<AcquireOutcome>)> done) {
  if (Status bad = detail::check_mode(call, "Redlock", kNoLines); !bad.ok())
    return asio::post(io_, [done = std::move(done), bad] { done(bad); });
  const auto start = Clock::now();  // before the first request: validity counts from here
  auto a = std::make_shared<Attempt>(call, start, per_node_timeout(command_timeout_, call.lease),
                                     RedlockAcquire::Nodes{&names_, &up_});
  a->round = ++rounds_;
  a->done = std::move(done);
  a->timer = make_timer(a->fsm.timer_at());
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i]->acquire_round(a->fsm.call(), a->round, [this, a, i](Result<AcquireOutcome> res) {
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
    nodes_[undo.node]->release_round(undo_of_round(a->fsm.call()), a->round,
                                     [this, a, counted = undo.counted](Result<ReleaseOutcome>) {
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
  fan_out<ReleaseOutcome, Result<ReleaseOutcome>>(
      std::move(done), release_decision, [&](std::size_t i, auto answer) { nodes_[i]->release(call, answer); });
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
  using Out = Result<std::vector<RenewOutcome>>;
  milliseconds lease = calls.empty() ? command_timeout_ : calls.front().lease;
  for (const auto& c : calls) lease = std::min(lease, c.lease);
  auto timer = make_timer(Clock::now() + per_node_timeout(command_timeout_, lease));
  // Per lease: extended only where a majority extended it.
  auto decide = [count = calls.size()](const detail::Quorum<std::vector<RenewOutcome>>& q) -> std::optional<Out> {
    if (!q.complete()) return std::nullopt;
    if (!q.majority_ok()) return q.failure("renewal");
    std::vector<RenewOutcome> out(count, RenewOutcome::expired);
    for (std::size_t k = 0; k < count; ++k) {
      for (RenewOutcome o : {RenewOutcome::renewed, RenewOutcome::taken, RenewOutcome::wrong_type}) {
        if (q.count([k, o](const std::vector<RenewOutcome>& a) { return a[k] == o; }) >= q.quorum()) {
          out[k] = o;
          break;
        }
      }
    }
    return out;
  };
  auto answered = [timer, done = std::move(done)](Out out) {
    timer->cancel();
    done(std::move(out));
  };
  auto f = fan_out<std::vector<RenewOutcome>, Out>(
      answered, decide, [&](std::size_t i, auto answer) { nodes_[i]->renew(calls, answer); });
  // Masters silent past the per-node timeout count as failed.
  timer->async_wait([this, f](const boost::system::error_code& ec) {
    if (ec || closed_ || f->answered()) return;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      f->add(i, Status(Errc::outcome_unknown, names_[i] + " did not answer the renewal in time"));
  });
}

// ---- inspect ---------------------------------------------------------------

// Every master's names: a lock held on a majority is named by at least
// one master that answers while a majority does.
void RedlockBackend::names(const std::string& prefix, std::function<void(Result<std::vector<std::string>>)> done) {
  using Out = Result<std::vector<std::string>>;
  auto decide = [](const detail::Quorum<std::vector<std::string>>& q) -> std::optional<Out> {
    if (!q.complete()) return std::nullopt;
    if (!q.majority_ok()) return q.failure("list");
    std::vector<std::string> all;
    for (const auto& a : q.answers())
      if (a) all.insert(all.end(), a->begin(), a->end());
    return all;
  };
  fan_out<std::vector<std::string>, Out>(std::move(done), decide,
                                         [&](std::size_t i, auto answer) { nodes_[i]->names(prefix, answer); });
}

void RedlockBackend::inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) {
  auto decide = [](const detail::Quorum<LockInfo>& q) -> std::optional<Result<LockInfo>> {
    if (!q.complete()) return std::nullopt;
    return merge_inspect(q);
  };
  fan_out<LockInfo, Result<LockInfo>>(std::move(done), decide,
                                      [&](std::size_t i, auto answer) { nodes_[i]->inspect(name, answer); });
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
    out.holders = 1;  // a plain lock: one grant
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

std::unique_ptr<detail::Backend> make_redlock_backend(asio::io_context& io, std::vector<redis::ConnectionConfig> nodes,
                                                      std::string key_prefix, milliseconds command_timeout) {
  return std::make_unique<RedlockBackend>(io, std::move(nodes), std::move(key_prefix), command_timeout);
}

}  // namespace dlock::redlock

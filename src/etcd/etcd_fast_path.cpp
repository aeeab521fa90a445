// The etcd backend's blocking fast path: the lock's transaction, and a
// release's, on the caller's own thread with gRPC's blocking stub, so a
// free lock costs one round trip and no hop through the I/O thread. What
// the I/O thread keeps of a fast grant (its hold, the watch of its key) is
// handed to it without waiting; a busy answer hands over the place in line.
// A fast key is always named <lease>_<attempt>: it never shares a name with
// a key the I/O thread may be putting or deleting meanwhile.

#include "core/lock_line.hpp"
#include "core/queue_line.hpp"
#include "etcd/etcd_lock.hpp"

namespace dlock::etcd {

template <class F>
auto EtcdBackend::with_fast(F f) -> std::optional<decltype(f())> {
  {
    std::lock_guard lk(fast_mu_);
    if (fast_closed_) return std::nullopt;
    ++fast_busy_;
  }
  auto out = f();
  std::lock_guard lk(fast_mu_);
  if (--fast_busy_ == 0) fast_cv_.notify_all();
  return out;
}

void EtcdBackend::forget_fast(std::optional<std::uint64_t> grant) {
  std::lock_guard lk(fast_mu_);
  if (grant)
    fast_keys_.erase(*grant);
  else
    fast_keys_.clear();
}

void EtcdBackend::close_fast() {
  std::unique_lock lk(fast_mu_);
  fast_closed_ = true;
  // A caller's call is bounded by its deadline; rpc_ outlives it.
  fast_cv_.wait(lk, [this] { return fast_busy_ == 0; });
  fast_keys_.clear();
}

std::optional<Result<AcquireOutcome>> EtcdBackend::acquire_now(const AcquireCall& call) {
  if (call.held != 0) return std::nullopt;
  auto r = with_fast([&]() -> std::optional<Result<AcquireOutcome>> {
    const std::int64_t lease = lease_now_.load();
    if (lease == 0) return std::nullopt;  // the I/O thread answers (no lease yet)
    Attempt a;
    a.name = call.name;
    a.owner = call.owner;
    a.info = call.info;
    a.lease = lease;
    a.mode = call.mode;
    a.permits = call.mode == detail::LockMode::shared ? call.permits : 0;
    a.grant = call.grant;
    a.key = unique_key(a, call.attempt, "__");
    a.sent = true;
    a.puts = 1;
    const auto deadline = std::min({by(), call.deadline, Clock::now() + kAttemptPatience});
    ++calls_;
    auto line = rpc_->join_line_now(a.key, a.info, lease, line_of(a.name), deadline);
    return fast_outcome(call, std::move(a), std::move(line));
  });
  return r ? std::move(*r) : std::nullopt;
}

std::optional<Result<AcquireOutcome>> EtcdBackend::fast_outcome(const AcquireCall& call, Attempt a,
                                                                Result<EtcdRpc::Line> line) {
  if (!line.ok()) {
    // Its put may have happened (or may still): the I/O thread deletes the
    // key, watching for a late put. A refused lease is its news to tell.
    loop([this, key = a.key, lease = a.lease, refused = line.status().code() == Errc::not_held] {
      if (lease != lease_) return;  // the key went with its lease
      if (refused) return lease_ended(LossReason::expired, "a put under this client's etcd lease was refused");
      remove_key({key, 0, true}, [](Status) {});
    });
    if (line.status().code() == Errc::not_held) return Result<AcquireOutcome>(lease_ended_meanwhile());
    if (line.status().code() == Errc::outcome_unknown && Clock::now() >= call.deadline)
      return Result<AcquireOutcome>(
          Status(Errc::timeout, "etcd: no answer from the cluster within the wait (a member frozen or cut off?)"));
    return Result<AcquireOutcome>(attempt_failed(line.status()));
  }
  // Its own name, so the key is this put's unless a repeat found it.
  a.revision = line->mine.create_revision;
  const auto entries = entries_of(line->keys, line_of(a.name));
  const detail::Standing st = detail::standing_of(entries, a.key);
  auto drop_key = [&] {
    loop([this, key = a.key, rev = a.revision, lease = a.lease] {
      if (lease == lease_) remove_key({key, rev, false}, [](Status) {});
    });
  };
  if (!line->created || line->mine.lease != a.lease || !st.present) {
    drop_key();
    return std::nullopt;  // the I/O thread takes it from here
  }
  if (st.disagrees) {
    drop_key();
    return Result<AcquireOutcome>(detail::disagreeing(a.name, a.permits, *st.disagrees));
  }
  if (!st.granted) {
    // A wait keeps the place: the I/O thread's acquire under this attempt
    // goes on from this line (its watches, then a look for what changed
    // since it was read).
    if (!call.keep_place) {
      drop_key();
    } else {
      a.line = std::move(*line);
      loop([this, id = call.attempt, a = std::move(a)]() mutable {
        if (a.lease == lease_) attempts_.emplace(id, std::move(a));
      });
    }
    return Result<AcquireOutcome>(AcquireOutcome::busy_with(detail::WaitHint::watched()));
  }
  return fast_grant(call, std::move(a));
}

// Granted on the caller's thread: the hold (and the watch of its key) is
// the I/O thread's from the next turn of its loop; a release claimed before
// then finds the key here.
Result<AcquireOutcome> EtcdBackend::fast_grant(const AcquireCall& call, Attempt a) {
  {
    std::lock_guard lk(fast_mu_);
    fast_keys_[call.grant] = {a.key, a.revision};
  }
  auto out = AcquireOutcome::granted_now(static_cast<std::uint64_t>(a.revision),
                                         Clock::time_point(Clock::duration(until_now_.load())));
  loop([this, grant = call.grant, a = std::move(a)] {
    if (a.lease != lease_) {  // its lease ended meanwhile: so did the hold
      forget_fast(grant);
      if (events_.lost) events_.lost({{a.name, a.owner, grant}}, LossReason::expired);
      return;
    }
    keep_hold(grant, a);
  });
  return Result<AcquireOutcome>(out);
}

std::optional<Result<ReleaseOutcome>> EtcdBackend::release_now(const ReleaseCall& call) {
  auto r = with_fast([&]() -> std::optional<Result<ReleaseOutcome>> {
    FastKey k;
    {
      std::lock_guard lk(fast_mu_);
      auto it = fast_keys_.find(call.grant);
      if (it == fast_keys_.end()) return std::nullopt;  // the I/O thread's hold
      k = std::move(it->second);
      fast_keys_.erase(it);
      fast_releasing_.insert(call.grant);
    }
    ++calls_;
    auto erased = rpc_->erase_created_now(k.key, k.revision, by());
    const bool for_good = !erased.ok() && refused_for_good(erased.status());
    loop([this, grant = call.grant, ok = erased.ok(), for_good, refused = erased.status(), k] {
      {
        std::lock_guard lk(fast_mu_);
        fast_releasing_.erase(grant);
      }
      auto it = held_.find(grant);
      if (it == held_.end()) return;  // lost meanwhile (its grant was handed over before this)
      if (ok) {
        drop_watch(it->second.watch);
        held_.erase(it);
        return;
      }
      if (for_good) {
        let_lease_go(refused);
        return;
      }
      // Unknown: kept (releasing, its name reserved), deleted again in the
      // background, and a repeated release asks the server again.
      it->second.releasing = true;
      drop_watch(it->second.watch);
      remove_key({k.key, k.revision, false}, [](Status) {});
    });
    if (for_good) return Result<ReleaseOutcome>(refused_release(erased.status()));
    if (!erased.ok()) {
      // The caller may ask again (the client repeats an unknown release on
      // the next member): the key stays this grant's until answered.
      std::lock_guard lk(fast_mu_);
      fast_keys_.emplace(call.grant, std::move(k));
      return Result<ReleaseOutcome>(erased.status());
    }
    return Result<ReleaseOutcome>(
        ReleaseOutcome{erased->deleted ? ReleaseOutcome::Kind::released : ReleaseOutcome::Kind::not_held, 0});
  });
  return r ? std::move(*r) : std::nullopt;
}

}  // namespace dlock::etcd

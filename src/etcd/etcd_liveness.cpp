// Liveness is the lease's, and only the leader expires leases. A keep-alive
// is answered by the leader (a follower forwards it), which then keeps the
// lease for its TTL from no earlier than the request's send time; a new
// leader extends every lease when it takes over. So every hold is valid
// until the send time of the last answered keep-alive + TTL, less drift
// (pushed as alive_until). If that passes with no answer (the client or its
// member was partitioned or paused), every hold is reported lost before the
// leader can have expired the lease, the lease is revoked (best effort) and
// a new one asked for. A lease the leader says is gone is reported at once.
// A new lease never re-acquires by itself: waiters are told to look again
// and queue under it.
#include "core/validity.hpp"
#include "etcd/etcd_lock.hpp"

namespace dlock::etcd {

void EtcdBackend::finish_start(Status s) { post(std::exchange(start_done_, nullptr), std::move(s)); }

void EtcdBackend::ask_lease() {
  if (lease_asked_ || closed_) return;
  lease_asked_ = true;
  const auto sent_at = Clock::now();
  ++calls_;
  rpc_->grant_lease(config_.session_ttl.count(), by(), [this, sent_at](Result<EtcdRpc::LeaseGrant> g) {
    loop([this, sent_at, g = std::move(g)] {
      lease_asked_ = false;
      if (!g.ok()) {
        // A connect's own lease left in doubt (no quorum answered) would go
        // by itself: the cluster is unavailable, not the outcome unknown.
        if (start_done_ && g.code() == Errc::outcome_unknown)
          return finish_start(
              Status(Errc::unavailable, "etcd: no quorum granted this client's lease (" + g.status().message() + ")"));
        if (start_done_) return finish_start(g.status());
        log(LogLevel::warning, "etcd: no lease (" + g.status().to_string() + "); asking again");
        lease_retry_.expires_after(std::chrono::milliseconds(500));
        lease_retry_.async_wait([this](const boost::system::error_code& ec) {
          if (!ec && !closed_) ask_lease();
        });
        return;
      }
      const bool first = start_done_ != nullptr;
      lease_ = g->id;
      ttl_ = std::chrono::seconds(g->ttl_seconds);
      keeper_->keep(lease_, ttl_);
      vouch(sent_at, g->ttl_seconds);
      lease_now_ = lease_;  // the fast path may use it (and until_) from now on
      if (first) return finish_start({});
      // Waiters whose keys went with the last lease queue under this one.
      if (events_.resync) events_.resync();
    });
  });
}

void EtcdBackend::on_kept(std::int64_t lease, Clock::time_point sent_at, std::int64_t ttl) {
  if (lease != lease_) return;  // an earlier lease's answer
  if (ttl > 0) {
    said_gone_ = 0;
    return vouch(sent_at, ttl);
  }
  // A member that has just stopped leading (paused, cut off) may still
  // answer from its stale view: one answer proves nothing, and the holds'
  // own watches tell of keys that really went. Two in a row are believed.
  if (++said_gone_ < 2) return log(LogLevel::info, "etcd: a member says this client's lease is gone; asking again");
  lease_ended(LossReason::expired, "the etcd leader says this client's lease is gone");
}

void EtcdBackend::vouch(Clock::time_point sent_at, std::int64_t ttl_seconds) {
  const auto until = detail::valid_until(sent_at, std::chrono::seconds(ttl_seconds));
  if (until <= until_) return;
  until_ = until;
  until_now_ = until_.time_since_epoch().count();
  if (events_.alive_until) events_.alive_until(until_);
  arm_deadline();
}

void EtcdBackend::arm_deadline() {
  deadline_.expires_at(until_);
  deadline_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || closed_ || lease_ == 0) return;  // cancelled, or armed again
    if (Clock::now() < until_) return arm_deadline();
    lease_ended(LossReason::unreachable,
                "no keep-alive of the etcd lease was answered within its TTL (" + std::to_string(ttl_.count()) + " s)");
  });
}

void EtcdBackend::lease_ended(LossReason reason, const std::string& why) {
  const bool had = !held_.empty();
  log(had ? LogLevel::warning : LogLevel::info, "etcd: " + why + (had ? ": every lock this client held is lost" : ""));
  const std::int64_t old = lease_;
  lease_ = 0;
  lease_now_ = 0;
  until_now_ = 0;
  said_gone_ = 0;
  until_ = {};
  deadline_.cancel();
  for (auto& [grant, h] : held_) drop_watch(h.watch);
  for (auto& [id, a] : attempts_) drop_watches(a);
  for (auto& [key, watch] : guarded_) drop_watch(watch);
  held_.clear();
  forget_fast(std::nullopt);
  attempts_.clear();
  guarded_.clear();
  orphans_.clear();  // their keys go with the lease
  if (had && events_.lost) events_.lost({}, reason);
  ++reconnects_;
  keeper_->keep(0, std::chrono::seconds(0));  // no keep-alive of the old lease from now on
  // Its keys go now rather than at its end, if a member hears it.
  if (old != 0) revoke(old, Clock::now() + 2 * ttl_);
  ask_lease();
}

void EtcdBackend::revoke(std::int64_t lease, Clock::time_point give_up) {
  ++calls_;
  rpc_->revoke_lease(lease, by(), [this, lease, give_up](Result<bool> r) {
    loop([this, lease, give_up, ok = r.ok()] {
      if (ok || Clock::now() >= give_up) return;
      auto retry = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(500));
      retry->async_wait([this, retry, lease, give_up](const boost::system::error_code& ec) {
        if (!ec && !closed_) revoke(lease, give_up);
      });
    });
  });
}

}  // namespace dlock::etcd

// Liveness is the session's, and only the leader expires sessions. A
// follower answers reads by itself even when cut off from the leader, so a
// reply proves nothing: the proof comes from syncs through the leader (see
// leader_proof.hpp), sent every sixth of the timeout while a session is
// connected, and from the leader's own touches when a session is created
// (from the moment it was asked for) or revalidated on a reconnect (from
// the newest request answered before). Each hold is valid until what the
// leader vouches for (pushed as alive_until). If the proof runs out (no
// answer: the client or its server was partitioned or paused) every hold
// is reported lost and the session is closed and replaced: the leader
// cannot have expired it before that moment, so the loss is reported
// before anyone else can be granted. A session the server expired is
// reported at once. A new session never re-acquires by itself.

#include "core/validity.hpp"
#include "zookeeper/zk_backend.hpp"
#include "zookeeper/zk_lock.hpp"

namespace dlock::zookeeper {

Status ZkBackend::open_session() {
  session_id_ = 0;
  opened_at_ = Clock::now();
  Status s = session_.open();
  if (s.ok() && !config_.user.empty()) s = session_.add_digest_auth(config_.user, config_.password);
  return s;
}

void ZkBackend::finish_start(Status s) {
  start_timer_.cancel();
  post(std::exchange(start_done_, nullptr), std::move(s));
}

milliseconds ZkBackend::session_timeout() const {
  const auto t = timeout_ms_.load();
  return t > 0 ? milliseconds(t) : config_.session_timeout;
}

void ZkBackend::on_state(const SessionState& s) {
  if (closed_) return;
  ++link_epoch_;
  proof_.reset();
  if (s.state == ZOO_CONNECTED_STATE) {
    const bool same = session_id_ != 0 && s.session_id == session_id_;
    if (same) ++reconnects_;
    if (!same) held_.set_session(s.session_id);  // before the fast path can see the session
    session_id_ = s.session_id;
    timeout_ms_ = (s.timeout.count() > 0 ? s.timeout : config_.session_timeout).count();
    proof_.set_timeout(session_timeout());
    // The leader touched the session when it made it (after open_session)
    // or revalidated it for this connection (after every request answered
    // on the previous one).
    vouch(same ? Clock::time_point(Clock::duration(heard_ns_.load())) : opened_at_);
    if (start_done_) finish_start({});
    if (!heartbeat_out_) {
      heartbeat_armed_ = false;
      heartbeat_.cancel();
      send_heartbeat();
    }
    retry_orphans();
    if (!same) {
      // A new session has none of the old one's watches: the observers'
      // are set again, and told (a change may have been missed).
      for (const auto& [name, refs] : observers_) {
        arm_observer(name, [](Status) {});
        if (events_.released) events_.released({name, 0});
      }
    }
    // Watch events are re-armed by the C client on reconnect; a wake-up
    // lost meanwhile costs each waiter one more look at its queue.
    if (events_.resync) events_.resync();
  } else if (s.state == ZOO_EXPIRED_SESSION_STATE) {
    session_ended(LossReason::expired, "the ZooKeeper session expired");
  } else if (s.state == ZOO_AUTH_FAILED_STATE) {
    if (start_done_) return finish_start({Errc::auth_failed, "zookeeper: authentication failed", "ZAUTHFAILED"});
    session_ended(LossReason::unreachable, "ZooKeeper authentication failed");
  }
  // CONNECTING / ASSOCIATING: the C client reconnects by itself; the
  // deadline decides whether holds survive it.
}

void ZkBackend::session_ended(LossReason reason, const std::string& why) {
  const bool had = held_.clear();
  log(had ? LogLevel::warning : LogLevel::info, why + (had ? ": every lock this client held is lost" : ""));
  attempts_.clear();
  watchers_.clear();
  child_watchers_.clear();
  orphans_.clear();  // their session's nodes go with it
  grant_proven();    // attempts_ is empty: each is told its session ended
  heard_ns_ = 0;
  until_ = {};
  vouched_ns_ = 0;
  deadline_.cancel();
  if (had && events_.lost) events_.lost({}, reason);
  ++reconnects_;
  if (Status s = open_session(); !s.ok()) log(LogLevel::error, "zookeeper: a new session failed: " + s.to_string());
}

void ZkBackend::heard(Clock::time_point sent_at) {
  const Clock::rep at = sent_at.time_since_epoch().count();
  Clock::rep seen = heard_ns_.load();
  while (seen < at && !heard_ns_.compare_exchange_weak(seen, at)) {
  }
}

void ZkBackend::vouch(Clock::time_point at) {
  const auto until = detail::valid_until(at, session_timeout());
  if (until <= until_) return;
  until_ = until;
  vouched_ns_ = until.time_since_epoch().count();
  if (events_.alive_until) events_.alive_until(until_);
  if (!held_.empty()) arm_deadline();
  if (!unproven_.empty() && Clock::now() < until_) grant_proven();
}

void ZkBackend::arm_deadline() {
  deadline_armed_ = true;
  deadline_.expires_at(until_);
  deadline_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled, or armed again (the new wait keeps the flag)
    // Cleared before held_ is read: a grant added after that read finds
    // the flag down and arms the timer again (deadline_for_grant).
    deadline_armed_ = false;
    if (closed_ || held_.empty()) return;
    if (Clock::now() < until_) return arm_deadline();
    session_ended(LossReason::unreachable,
                  "the ZooKeeper leader no longer vouches for the session (no answer "
                  "through it within the session timeout)");
  });
}

void ZkBackend::deadline_for_grant() {
  if (!deadline_armed_.load()) loop([this] { arm_deadline(); });
}

void ZkBackend::schedule_heartbeat() {
  if (heartbeat_armed_ || heartbeat_out_ || closed_) return;
  heartbeat_armed_ = true;
  heartbeat_.expires_after(proof_.interval());
  heartbeat_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: whoever cancelled sends or re-arms
    heartbeat_armed_ = false;
    if (!closed_) send_heartbeat();
  });
}

void ZkBackend::send_heartbeat() {
  heartbeat_out_ = true;
  session_.sync(config_.base.empty() ? "/" : config_.base, [this, epoch = link_epoch_](Reply r) {
    heartbeat_out_ = false;
    if (closed_) return;
    if (answered(r.rc)) heard(r.sent_at);
    if (r.rc == ZOK && epoch == link_epoch_)
      if (auto at = proof_.answered(r.sent_at, Clock::now())) vouch(*at);
    schedule_heartbeat();
  });
}

}  // namespace dlock::zookeeper

// The ZooKeeper backend's blocking fast path: a free lock taken, and its
// release, on the caller's thread (see acquire_now in zk_lock.hpp).
#include "core/token.hpp"
#include "core/validity.hpp"
#include "zookeeper/lock_queue.hpp"
#include "zookeeper/zk_lock.hpp"

namespace dlock::zookeeper {

std::optional<Result<AcquireOutcome>> ZkBackend::acquire_now(const AcquireCall& call) {
  const std::int64_t session = session_id_.load();
  if (session == 0) return std::nullopt;
  if (Status s = refuse(call); !s.ok()) return Result<AcquireOutcome>(s);
  const unsigned permits = call.mode == detail::LockMode::shared ? call.permits : 0;
  const std::string parent = config_.base + "/" + encode_name(call.name);
  const bool known = known_parents_.contains(parent);
  auto w = std::make_shared<Rendezvous>(known ? 2 : 3);
  const auto via = ZkSession::Delivery::direct;
  if (!known)
    session_.create(
        parent, "", ZOO_CONTAINER, creator_acl(), [w](Reply) { w->arrive(); }, via);
  const std::string guid = detail::random_token();
  session_.create(
      parent + "/" + child_prefix(guid, call.mode, permits, config_.naming),
      node_data(config_.naming, call.owner, call.info), ZOO_EPHEMERAL_SEQUENTIAL, creator_acl(),
      [w](Reply r) { w->arrive(&Rendezvous::created, std::move(r)); }, via);
  session_.children(
      parent, [w](Reply r) { w->arrive(&Rendezvous::listed, std::move(r)); }, via);
  if (!w->wait_until(call.deadline)) {
    // The server did not answer in time: the node may still be made (the
    // lookup by guid is sent after the create, so the server sees it after).
    drop_later({parent, guid, ""});
    return Result<AcquireOutcome>(
        Status(Errc::timeout, "zookeeper: no answer from the server within the wait (paused or cut off?)"));
  }
  const Reply& c = w->created;
  const Reply& l = w->listed;
  if (answered(c.rc)) heard(c.sent_at);
  if (c.rc == ZNONODE) return std::nullopt;  // the base is missing: the I/O thread makes the path
  if (c.rc != ZOK) {
    if (connection_lost(c.rc)) drop_later({parent, guid, ""});  // it may exist: found by its guid
    return Result<AcquireOutcome>(rc_status(c.rc, "create the queue node"));
  }
  known_parents_.insert(parent);
  if (l.rc != ZOK) {
    // Only a busy answer hands a place in line to the wait: an error starts
    // the wait afresh, so this node must go.
    drop_later({"", "", c.path});
    return Result<AcquireOutcome>(rc_status(l.rc, "list the lock queue"));
  }
  const Standing st = standing_of(line_of(l.children), basename_of(c.path));
  if (st.disagrees && c.stat.ephemeral_owner == session) {
    drop_later({"", "", c.path});
    return Result<AcquireOutcome>(detail::disagreeing(call.name, permits, *st.disagrees));
  }
  if (st.granted && c.stat.ephemeral_owner == session && Clock::now() >= vouched()) {
    // Granted on a session the leader is not known to keep (a reconnect
    // after an outage longer than the proof): the I/O thread grants it
    // once a proof comes, from this place in line if the call may wait.
    if (!call.keep_place) {
      drop_later({"", "", c.path});
      return std::nullopt;
    }
    keep_place(call, guid, parent, c, permits);
    return Result<AcquireOutcome>(AcquireOutcome::busy_with(detail::WaitHint::retry(milliseconds(0))));
  }
  if (!st.granted || c.stat.ephemeral_owner != session) {
    if (!call.keep_place || c.stat.ephemeral_owner != session)
      drop_later({"", "", c.path});
    else
      keep_place(call, guid, parent, c, permits);
    return Result<AcquireOutcome>(AcquireOutcome::busy_with(detail::WaitHint::watched()));
  }
  // Refused if the session ended meanwhile (its nodes went with it): held
  // nodes are tagged with their session, so the next one cannot keep this
  // grant alive.
  HeldNode held{c.path, call.name, call.owner, session};
  held.shared = call.mode == detail::LockMode::shared;
  if (!held_.add(call.grant, std::move(held))) return Result<AcquireOutcome>(session_gone());
  // Neither wakes the I/O thread unless a timer must be armed.
  watch_soon(c.path);
  deadline_for_grant();
  // Valid for what the leader vouches for, never a follower's reply.
  return Result<AcquireOutcome>(AcquireOutcome::granted_now(static_cast<std::uint64_t>(c.stat.czxid), vouched()));
}

std::optional<Result<ReleaseOutcome>> ZkBackend::release_now(const ReleaseCall& call) {
  const auto path = held_.start_release(call.grant);
  if (!path) return std::nullopt;  // not a grant this client holds: the I/O thread answers
  auto w = std::make_shared<Rendezvous>(1);
  session_.remove(
      *path, [w](Reply r) { w->arrive(&Rendezvous::created, std::move(r)); }, ZkSession::Delivery::direct);
  if (!w->wait_until(Clock::now() + config_.command_timeout)) {
    // A frozen server: the caller is not held past the command timeout. The
    // delete may still happen; the node is deleted again on every reconnect.
    drop_later({"", "", *path});
    return Result<ReleaseOutcome>(
        Status(Errc::outcome_unknown, "zookeeper: no reply to the lock node's delete within " +
                                          std::to_string(config_.command_timeout.count()) + " ms"));
  }
  const Reply& r = w->created;
  if (answered(r.rc)) heard(r.sent_at);
  if (r.rc == ZOK || r.rc == ZNONODE) {
    held_.erase(call.grant);
    return Result<ReleaseOutcome>(
        ReleaseOutcome{r.rc == ZOK ? ReleaseOutcome::Kind::released : ReleaseOutcome::Kind::not_held, 0});
  }
  drop_later({"", "", *path});  // deleted again on every reconnect (see release())
  return Result<ReleaseOutcome>(rc_status(r.rc, "delete the lock node", Errc::outcome_unknown));
}

// The wait goes on on the I/O thread under the call's attempt id, from the
// place in line `created` took (posted before the wait is).
void ZkBackend::keep_place(const AcquireCall& call, const std::string& guid, const std::string& parent,
                           const Reply& created, unsigned permits) {
  Attempt a{call.name, call.owner, guid, parent, created.path, created.stat.czxid, created.stat.ephemeral_owner,
            call.grant};
  a.mode = call.mode;
  a.permits = permits;
  a.info = call.info;
  loop([this, id = call.attempt, a = std::move(a)]() mutable {
    if (session_id_.load() == a.session)
      attempts_.emplace(id, std::move(a));
    else
      remove_orphan({"", "", a.node}, [](Status) {});
  });
}

}  // namespace dlock::zookeeper

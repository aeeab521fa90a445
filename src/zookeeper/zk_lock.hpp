// The ZooKeeper backend's class, shared by its source files: the
// queue on the I/O thread (zk_backend.cpp), the session's liveness
// (zk_liveness.cpp) and the blocking fast path on callers' threads
// (zk_fast_path.cpp). Internal.
#ifndef DLOCK_ZOOKEEPER_ZK_LOCK_HPP_
#define DLOCK_ZOOKEEPER_ZK_LOCK_HPP_

#include <zookeeper/zookeeper.h>

#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "backend.hpp"
#include "zookeeper/held_nodes.hpp"
#include "zookeeper/leader_proof.hpp"
#include "zookeeper/lock_queue.hpp"
#include "zookeeper/zk_session.hpp"

namespace dlock::zookeeper {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using detail::AbandonCall;
using detail::AcquireCall;
using detail::AcquireOutcome;
using detail::ReleaseCall;
using detail::ReleaseOutcome;
using detail::RenewCall;
using detail::RenewOutcome;
using detail::WatchKey;
using AcquireDone = std::function<void(Result<AcquireOutcome>)>;
using StatusDone = std::function<void(Status)>;

// The server answered (the session was alive when the request was sent).
inline bool answered(int rc) {
  return rc == ZOK ||
         (rc <= ZAPIERROR && rc != ZSESSIONEXPIRED && rc != ZCLOSING && rc != ZSESSIONMOVED && rc != ZAUTHFAILED);
}

// The request may have been applied though no answer came: the C client
// fails every request in flight with the error that dropped its connection
// (not only ZCONNECTIONLOSS: a run-time inconsistency, a marshalling error).
// Bad arguments and "unimplemented" were refused before sending.
inline bool connection_lost(int rc) {
  return (rc <= ZSYSTEMERROR && rc >= ZOPERATIONTIMEOUT && rc != ZUNIMPLEMENTED) || rc == ZSSLCONNECTIONERROR;
}

inline std::string basename_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }

inline Status cancelled() { return {Errc::cancelled, "client closed"}; }

class ZkBackend final : public detail::Backend {
 public:
  ZkBackend(asio::io_context& io, ZkConfig config)
      : io_(io),
        config_(std::move(config)),
        session_(io, config_,
                 {[this](const SessionState& s) { on_state(s); },
                  [this](int type, const std::string& path) { on_node_event(type, path); }}),
        start_timer_(io),
        heartbeat_(io),
        deadline_(io),
        watch_timer_(io),
        proof_(config_.session_timeout) {}

  detail::Capabilities capabilities() const override;
  void set_events(detail::BackendEvents events) override { events_ = std::move(events); }

  void start(StatusDone done) override;

  void close() override;

  void acquire(const AcquireCall& call, AcquireDone done) override;

  void release(const ReleaseCall& call, std::function<void(Result<ReleaseOutcome>)> done) override;

  // Removes the attempt's queue node: known, or found by its guid.
  void abandon(const AbandonCall& call, StatusDone done) override;

  void renew(const std::vector<RenewCall>&, std::function<void(Result<std::vector<RenewOutcome>>)> done) override;

  void inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) override;
  void names(const std::string& prefix, std::function<void(Result<std::vector<std::string>>)> done) override;

  // The blocking fast path, on the caller's thread: the queue node and the
  // listing in one round trip, the replies handed over on the C client's
  // completion thread (a hop to the I/O thread and back costs more than
  // ZooKeeper's reply). Only a lock it may take at once (free, or shared
  // with room) is taken here; a queue to wait in
  // is the I/O thread's job (this node is then deleted, and the waiting
  // acquire queues anew).
  std::optional<Result<AcquireOutcome>> acquire_now(const AcquireCall& call) override;
  void keep_place(const AcquireCall& call, const std::string& guid, const std::string& parent, const Reply& created,
                  unsigned permits);

  std::optional<Result<ReleaseOutcome>> release_now(const ReleaseCall& call) override;

  // An attempt's watch is set on the nodes ahead when it answered busy:
  // nothing more to do here.
  void watch(const WatchKey&, StatusDone ready) override { post(std::move(ready), Status()); }
  void unwatch(const WatchKey&) override {}
  // A watch on the lock's children, re-armed after every change, told as
  // released({name, 0}) (an election's observers learn of a new leader).
  void observe(const std::string& name, StatusDone ready) override;
  void unobserve(const std::string& name) override;

  std::uint64_t commands_sent() const override { return session_.calls(); }
  std::uint64_t reconnects() const override { return reconnects_; }

 private:
  struct Attempt {
    std::string name, owner, guid, parent;
    std::string node;  // full path, once created (or found)
    std::int64_t czxid = 0, session = 0;
    std::uint64_t grant = 0;
    bool create_unknown = false;  // a create's reply was lost: find the node by guid
    int recreated = 0;            // within this call: a vanished node or parent made again
    int ghosts_removed = 0;       // within this call: listings that found an own lost create
    detail::LockMode mode = detail::LockMode::exclusive;
    unsigned permits = 0;
    std::string info{};
  };
  // A node to delete (path), or to find first (parent + guid).
  struct Orphan {
    std::string parent, guid, path;
  };

  // The fast path's wait for its replies (arriving on the C client's thread).
  struct Rendezvous {
    explicit Rendezvous(int n) : left(n) {}
    void arrive(Reply Rendezvous::*slot = nullptr, Reply r = {}) {
      std::lock_guard lk(mu);
      if (slot) this->*slot = std::move(r);
      if (--left == 0) cv.notify_one();
    }
    void wait() {
      std::unique_lock lk(mu);
      cv.wait(lk, [&] { return left == 0; });
    }
    // False if `by` came first (the replies may still come: this object
    // lives on with them).
    bool wait_until(Clock::time_point by) {
      if (by == Clock::time_point::max()) return wait(), true;
      std::unique_lock lk(mu);
      return cv.wait_until(lk, by, [&] { return left == 0; });
    }
    std::mutex mu;
    std::condition_variable cv;
    int left;
    Reply created, listed;
  };

  // Runs `f` on the I/O thread.
  template <class F>
  void loop(F f) {
    asio::post(io_, [this, f = std::move(f)]() mutable {
      if (!closed_) f();
    });
  }

  // A node the fast path leaves to the I/O thread to delete.
  void drop_later(Orphan o);

  template <class Done, class Value>
  void post(Done done, Value value) {
    asio::post(io_, [done = std::move(done), value = std::move(value)]() mutable { done(std::move(value)); });
  }

  void log(LogLevel level, const std::string& message);

  Status open_session();

  void finish_start(Status s);

  bool creator_acl() const { return !config_.user.empty(); }

  milliseconds session_timeout() const;

  // ---- session ----

  void on_state(const SessionState& s);

  // Every hold is gone (or can no longer be vouched for): told first, then
  // the session is closed (its nodes go with it) and a new one opened.
  void session_ended(LossReason reason, const std::string& why);

  // A request sent at `sent_at` was answered: the newest such time is what
  // a reconnect's revalidation at the leader vouches from. Any thread.
  void heard(Clock::time_point sent_at);

  // The leader keeps the session at least until `at` + the timeout (less
  // drift): every hold is valid until then.
  void vouch(Clock::time_point at);

  // What the leader is known to vouch for (steady_clock), any thread.
  Clock::time_point vouched() const { return Clock::time_point(Clock::duration(vouched_ns_.load())); }

  void arm_deadline();
  // The fast path's grant: the deadline timer is armed unless it already
  // is (a post per grant would wake the I/O thread on every lock).
  void deadline_for_grant();

  // Syncs through the leader, one at a time, every proof_.interval() while
  // a session is connected (see leader_proof.hpp).
  void schedule_heartbeat();

  void send_heartbeat();

  // ---- the queue ----

  // One round trip: the lock's node (a container, when this client has not
  // seen it yet), the queue node and the queue listing go out together, and
  // the server answers them in order, so the listing includes the new node.
  void create_node(std::uint64_t id, AcquireDone done);

  struct Pipelined {
    AcquireDone done;
    bool created = false;  // the listing that follows is this attempt's to read
  };

  void on_created(std::uint64_t id, const std::shared_ptr<Pipelined>& flow, Reply r);

  // After a lost create reply: the node is ours if it carries our guid and
  // belongs to this session; otherwise it is made anew.
  void recover(std::uint64_t id, AcquireDone done);
  // children(parent) after a sync through the leader, so the listing holds
  // every create the leader applied (the server this session reconnected
  // to may lag); `done(sync rc, listing)`.
  void synced_children(const std::string& parent, std::function<void(int, Reply)> done);

  void check_queue(std::uint64_t id, AcquireDone done);

  void on_listed(std::uint64_t id, AcquireDone done, Reply r);

  // Grants attempt `id` if the leader vouches for the session now; else
  // (just reconnected after an outage longer than the proof) the grant
  // waits for the next proof: granted then, the session would be ended at
  // once for want of one, and the node with it.
  void grant(std::uint64_t id, AcquireDone done);
  void grant_proven();

  // Refusals before any node is made (ok: none): the owner holds the lock
  // in the other mode.
  Status refuse(const AcquireCall& call) const;

  // Sets the watches a waiting attempt needs, then answers busy.
  void watch_ahead(std::uint64_t id, const Standing& st, std::int64_t pzxid, AcquireDone done);

  // The attempt-0 watch on `name`'s children (or on its creation).
  void arm_observer(const std::string& name, StatusDone ready);

  static Status session_gone();

  // The attempt a reply belongs to, or null once `done` has been told why
  // there is none (closed, or its session ended).
  Attempt* live(std::uint64_t id, AcquireDone& done, const Reply& r);

  // Creates `path` and its missing ancestors (persistent; the lock's own
  // node a container, which the server removes once empty).
  void make_path(const std::string& path, StatusDone done, std::size_t from = 1);

  // A watched node changed or went: the attempt behind it looks again; a
  // hold whose own node went (deleted by hand or by a tool) is lost.
  void on_node_event(int type, const std::string& path);

  // Watches a hold's own node, so that its deletion is told at once.
  void watch_own(const std::string& path);
  // watch_own() for the holds still held kOwnWatchDelay from now (batched).
  // Any thread: only the first path of a batch wakes the I/O thread.
  void watch_soon(const std::string& path);
  void arm_watch_timer();
  static constexpr std::chrono::milliseconds kOwnWatchDelay{50};

  // The hold on `path` is gone while its session lives: told as lost.
  void node_lost(const std::string& path);

  // Deletes a queue node no acquire wants any more; kept and retried on
  // every reconnect until it is gone (or its session is).
  void remove_orphan(Orphan o, StatusDone done);

  // A lock node deleted by the orphan retry: no hold keeps it any more.
  void forget_held(const std::string& path) { held_.erase_path(path); }

  void retry_orphans();

  asio::io_context& io_;
  ZkConfig config_;
  ZkSession session_;
  detail::BackendEvents events_;
  StatusDone start_done_;
  asio::steady_timer start_timer_, heartbeat_, deadline_, watch_timer_;
  std::mutex watch_mu_;
  std::vector<std::string> watch_due_;  // watch_soon()'s paths, under watch_mu_
  bool watch_armed_ = false;            // under watch_mu_
  std::atomic<bool> deadline_armed_{false};
  bool heartbeat_armed_ = false, heartbeat_out_ = false;
  std::uint64_t link_epoch_ = 0;  // bumped on every session event: a connection's syncs prove only on it
  LeaderProof proof_;
  Clock::time_point opened_at_{};  // the current session was asked for then
  bool closed_ = false;
  // Written on the I/O thread, read by the fast path too.
  std::atomic<std::int64_t> session_id_{0};
  std::atomic<std::int64_t> timeout_ms_{0};  // negotiated; 0: not yet
  std::atomic<Clock::rep> heard_ns_{0};      // heard()'s newest send time
  Clock::time_point until_{};
  std::atomic<Clock::rep> vouched_ns_{0};                        // until_, for the fast path
  std::map<std::uint64_t, Attempt> attempts_;                    // by AcquireCall::attempt
  std::vector<std::pair<std::uint64_t, AcquireDone>> unproven_;  // grants awaiting a proof
  HeldNodes held_;
  std::map<std::string, std::set<std::uint64_t>> watchers_;        // node ahead -> attempts
  std::map<std::string, std::set<std::uint64_t>> child_watchers_;  // lock node -> attempts
  std::map<std::string, unsigned> observers_;                      // lock name -> attempt-0 watches
  std::map<std::string, std::string> observed_;                    // lock node -> lock name
  std::vector<Orphan> orphans_;
  KnownParents known_parents_;
  std::uint64_t reconnects_ = 0;
};

}  // namespace dlock::zookeeper

#endif  // DLOCK_ZOOKEEPER_ZK_LOCK_HPP_

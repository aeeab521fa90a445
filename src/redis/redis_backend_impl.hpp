// The Redis backend's one class (one server, Cluster, Sentinel; a Redlock
// master), its members defined by concern: redis_backend.cpp the I/O
// thread's path (scripts on the route's pipelined connections, renewals,
// names, inspect), redis_fast_path.cpp the blocking calls on the caller's
// thread, redis_watches.cpp the release notifications (subscribers per
// node, following a moving topology).
#ifndef DLOCK_REDIS_REDIS_BACKEND_IMPL_HPP_
#define DLOCK_REDIS_REDIS_BACKEND_IMPL_HPP_

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "redis/redis_backend.hpp"
#include "redis/route.hpp"
#include "redis/script_calls.hpp"
#include "redis/scripts.hpp"
#include "redis/subscriber.hpp"
#include "redis/sync_connection.hpp"
#include "waiter_turns.hpp"

namespace dlock::redis {

using detail::AcquireCall;
using detail::AcquireOutcome;
using detail::ReleaseCall;
using detail::ReleaseOutcome;
using detail::RenewCall;
using detail::RenewOutcome;

// A blocking call whose request is written and whose answer is unread
// (RedisBackend::send_now): it holds the pooled connection meanwhile.
struct SentEval {
  ScriptCall sc;
  bool waited = false;   // a WAIT follows the script in the same write
  std::string pool_key;  // the pool it goes back to
  std::unique_ptr<SyncConnection> conn;
  std::uint64_t before = 0;  // the connection's requests_sent() before the send
};

class RedisBackend final : public RedlockMaster {
 public:
  RedisBackend(boost::asio::io_context& io, std::unique_ptr<Route> route, ConnectionConfig config, std::string prefix,
               ReplicaWait wait);
  ~RedisBackend() override { close(); }

  void start(std::function<void(Status)> done) override;

  // Whether the cluster knows sharded pub/sub (Redis 7): COMMAND INFO
  // names SSUBSCRIBE there, an older server answers nil. Every client of a
  // cluster decides alike, so releases publish where waiters subscribe. A
  // user without the right to ask is taken to be on a current server.
  void probe_sharded(bool required, std::function<void(Status)> done);

  void close() override;

  detail::Capabilities capabilities() const override;
  void set_events(detail::BackendEvents events) override { events_ = std::move(events); }

  void acquire(const AcquireCall& call, std::function<void(Result<AcquireOutcome>)> done) override {
    acquire_round(call, 0, std::move(done));
  }
  void acquire_round(const AcquireCall& call, std::uint64_t round,
                     std::function<void(Result<AcquireOutcome>)> done) override;

  void release(const ReleaseCall& call, std::function<void(Result<ReleaseOutcome>)> done) override {
    release_round(call, 0, std::move(done));
  }
  void release_round(const ReleaseCall& call, std::uint64_t round,
                     std::function<void(Result<ReleaseOutcome>)> done) override;

  void abandon(const detail::AbandonCall& call, std::function<void(Status)> done) override;
  // invalid_argument for a fair, shared or counted call in the plain layout.
  Status check_layout(const AcquireCall& call) const;
  // A WRONGTYPE answer to `name`'s call, with the key and lock named.
  Status keyed(const Status& s, const std::string& name) const;

  // The blocking fast path, over TCP or TLS. In a cluster or behind
  // Sentinel it goes to the node the route names now; a redirect hands the
  // call to the I/O thread's path, which follows it (nothing ran). In WAIT
  // mode the WAIT goes in the same write as the script, as on the I/O
  // path, and a grant the replicas did not acknowledge is undone here.
  std::optional<Result<AcquireOutcome>> acquire_now(const AcquireCall& call) override;
  std::optional<Result<ReleaseOutcome>> release_now(const ReleaseCall& call) override;

  // Redlock's halves (RedlockMaster): one server, so never redirected.
  struct PendingEval final : Pending {
    std::unique_ptr<SentEval> eval;
    AcquireCall call;  // acquires: what the answer is parsed against
    int fd() const override { return eval->conn ? eval->conn->fd() : -1; }
  };
  Sent pending(std::optional<Result<std::unique_ptr<SentEval>>> sent, AcquireCall call = {});
  Sent send_acquire_now(const AcquireCall& call, std::uint64_t round, std::chrono::steady_clock::time_point by,
                        bool pooled_only) override;
  Sent send_release_now(const ReleaseCall& call, std::uint64_t round, std::chrono::steady_clock::time_point by,
                        bool pooled_only) override;
  Result<AcquireOutcome> acquire_answer(Pending& sent, std::chrono::steady_clock::time_point by,
                                        bool readable) override;
  Result<ReleaseOutcome> release_answer(Pending& sent, std::chrono::steady_clock::time_point by,
                                        bool readable) override;

  // One script call per slot (a script's keys must share one); the calls
  // to one master go out in one write, so a tick costs one round trip per
  // master. A master that fails leaves its calls unconfirmed (retried next
  // tick); only when all fail is the batch a failure.
  void renew(const std::vector<RenewCall>& calls, std::function<void(Result<std::vector<RenewOutcome>>)> done) override;

  // SCAN in pages of 1000 keys, on every master in turn; a key that moves
  // during the scan (expiry, a slot migration) may be reported twice or
  // missed (SCAN's guarantee covers keys that stay).
  void names(const std::string& prefix, std::function<void(Result<std::vector<std::string>>)> done) override;

  struct Scan {
    std::string pattern;
    std::vector<std::string> masters;  // left to scan; the current one first
    std::vector<std::string> found;
    std::function<void(Result<std::vector<std::string>>)> done;
  };

  void scan_page(std::shared_ptr<Scan> scan, const std::string& cursor);

  // The line's inspect script settles the name first (core/lock_line.cpp's
  // line_settle) and reports the oldest grant; a plain lock's waiters are
  // the subscribers of its channel, a line's are its line.
  void inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) override;

  // The inspect script's, the fence counter's and PUBSUB NUMSUB's replies.
  static ReplyHandler inspected(std::function<void(Result<LockInfo>)> done);

  // The dlock layout's waiters listen on the lock's channel for this
  // client (waiter_channel): a release wakes the first queued plain waiter
  // alone, by its attempt (lua/wake_lib.lua), and a line's hand-over is
  // sent to its recipient's client (lua/line_lib.lua). Observers, and every
  // waiter of the single-key layouts, share the lock's channel.
  void watch(const detail::WatchKey& key, std::function<void(Status)> ready) override;

  void unwatch(const detail::WatchKey& key) override;

  std::uint64_t commands_sent() const override;
  std::uint64_t reconnects() const override;

  // A Redlock master: its releases wake by broadcast, as a majority of
  // masters must agree on whom they woke, which one queue per master cannot.
  void wake_all_waiters() { wake_one_ = false; }

 private:
  // Whether this backend queues plain waiters and wakes them one at a time.
  bool wake_one() const { return wake_one_ && !keyspace_.single_key(); }
  // `call`'s waiter member, or empty when it joins no queue.
  std::string member_of(const AcquireCall& call, std::uint64_t round) const;
  // The channel `key`'s waiter listens on.
  std::string channel_of(const detail::WatchKey& key) const;
  // A wake-up for one of this client's plain waiters of `name`:
  // "w:<attempt>" (woken) or "s:<attempt>:<ms>" (stand by); turns_ says
  // what each does (one for an attempt no longer waiting: lua/leave.lua).
  void on_waiter_message(const std::string& name, std::string_view payload);
  void leave(const std::string& name, std::uint64_t attempt, std::function<void(Status)> done);

  struct RenewBatch {
    std::vector<RenewOutcome> out;  // unconfirmed until a group answers
    std::size_t groups_left = 0;
    std::size_t groups_answered = 0;
    Status failure;
    std::function<void(Result<std::vector<RenewOutcome>>)> done;

    void group_done(Status s) {
      if (s.ok())
        ++groups_answered;
      else if (failure.ok())
        failure = std::move(s);
      if (--groups_left > 0) return;
      if (groups_answered == 0) return done(failure);
      done(std::move(out));
    }
  };

  void renew_group(const std::vector<RenewCall>& calls, std::vector<std::size_t> indexes,
                   std::shared_ptr<RenewBatch> batch);

  // watch()/unwatch() of one channel of a lock (its own, or a peer's).
  void watch_channel(const std::string& name, const std::string& channel, std::function<void(Status)> ready);
  void unwatch_channel(const std::string& channel);

  struct Watch {
    std::string name;
    unsigned refs = 0;
    bool personal = false;  // a waiter channel (channel_of): wake-ups name an attempt
    bool confirmed = false;
    bool resync = false;  // subscribed again after a gap: waiters retry once
    std::string node;     // the subscriber it is (to be) subscribed on
    std::vector<std::function<void(Status)>> ready;
  };

  // The script as this backend sends it: sharded, every PUBLISH a SPUBLISH.
  const Script& published(const Script& s) const { return sharded_ ? with_sharded_publish(s) : s; }

  // EVALSHA, falling back to EVAL when the server has not seen the script
  // (first use, restart, SCRIPT FLUSH). NOSCRIPT means nothing ran, so the
  // fallback cannot apply anything twice.
  void eval(const Script& original, const std::vector<std::string>& keys, const std::vector<std::string>& args,
            std::function<void(Result<Reply>)> done);

  // The slot of a lock's keys (they share its tag); one server: -1.
  int slot_of(const std::string& key) const { return route_->cluster() ? key_slot(key) : -1; }

  bool sync_ok() const { return !config_.endpoint.tls || tls_ctx_ != nullptr; }

  // The fast path's endpoint for a node: the backend's credentials and
  // settings, at the node's address (db 0 in a cluster, which has no other).
  detail::RedisEndpoint endpoint_of(const ClusterNode& node) const;

  void open_blocking() override;
  void open_blocking_within(milliseconds patience) override;

  // EVALSHA (EVAL on NOSCRIPT) on a pooled blocking connection to the node
  // serving the keys, on the calling thread. A broken connection is
  // dropped; the next call opens one. nullopt: no node is known, or the
  // node redirected the call (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: nothing
  // ran), so the I/O path takes it.
  // `replicated` (WAIT mode): a WAIT follows the script, and its verdict
  // is set there.
  std::optional<Result<Reply>> eval_now(
      const ScriptCall& sc, std::chrono::steady_clock::time_point by = std::chrono::steady_clock::time_point::max(),
      Status* replicated = nullptr);

  // The two halves of eval_now: the request written (its connection held
  // by the SentEval), then its answer read and the connection pooled again.
  // pooled_only: nullopt rather than a connection opened now.
  std::optional<Result<std::unique_ptr<SentEval>>> send_now(const ScriptCall& sc,
                                                            std::chrono::steady_clock::time_point by,
                                                            bool pooled_only = false, bool waited = false);
  std::optional<Result<Reply>> receive_now(SentEval& sent, std::chrono::steady_clock::time_point by,
                                           bool readable = false, Status* replicated = nullptr);

  // EVALSHA, falling back to EVAL when the server has not seen the script
  // (first use, restart, SCRIPT FLUSH): NOSCRIPT means nothing ran, so the
  // fallback cannot apply anything twice. `waited` (WAIT mode): a WAIT in the
  // same pipeline, so it runs on the node that ran the script (after an ASK
  // too) and covers its writes, at no extra round trip; `done` gets the
  // script's reply and whether wait_.replicas replicas acknowledged within
  // wait_.timeout (unwaited: ok).
  void eval_script(const Script& original, const std::vector<std::string>& keys, const std::vector<std::string>& args,
                   bool waited, std::function<void(Result<Reply>, Status)> done);
  void run_eval(int slot, const Script& script, std::vector<std::string> commands,
                std::function<void(Result<Reply>, Status)> done, bool fallback);

  // A grant the replicas did not acknowledge is undone (idempotently: only
  // the level it added) and reported as unavailable. If the undo's outcome
  // is not known, neither is the grant's: outcome_unknown, so the caller
  // cleans up after it (an unavailable attempt needs no cleanup).
  void undo_unreplicated(const AcquireCall& call, const Status& why, std::function<void(Result<AcquireOutcome>)> done);
  static ReleaseCall undo_of_grant(const AcquireCall& call);
  static Status unreplicated(const Status& why, const Result<ReleaseOutcome>& undone);

  // WAIT's verdict: enough replicas acknowledged within the timeout?
  Status replication_of(const Reply& w) const;
  // A blocking request on its connection, with its WAIT behind it (and the
  // WAIT's time allowed for the answer) when it is a waited one.
  Status send_script(SentEval& sent, std::string payload) const;
  void append_wait(std::string& out) const {
    append_command(out, {"WAIT", std::to_string(wait_.replicas), std::to_string(wait_.timeout.count())});
  }

  // Watch callbacks never run inline (the caller may be iterating its own
  // waiters, or this very map): they are posted.
  void post_all(std::vector<std::function<void(Status)>> fs, const Status& s);
  void fail_ready(const Status& s);

  // Where `channel` is subscribed: the master of its slot (sharded), or
  // the one node every client of the set-up subscribes at (classic).
  ConnectionConfig node_for(const std::string& channel) const;
  static std::string node_key(const ConnectionConfig& c);

  // The subscriber at node `key` (made at `c` the first time). A watch's
  // node always has one.
  Subscriber& subscriber(const std::string& key, const ConnectionConfig& c);

  void on_subscriber_state(const std::string& key, bool up);

  void on_subscribed(const std::string& key, const std::string& channel, const Reply* error);

  // Sharded: the node unsubscribed the channel itself, its slot has moved.
  void on_dropped(const std::string& key, const std::string& channel);

  // Cluster or Sentinel: watches not subscribed (their node down, their
  // slot moved) go to the node the route names now, once it has learnt the
  // change; until then this runs again. A subscriber no watch needs any
  // more and that is down is closed.
  void rehome_later();

  void rehome();

  void on_message(const std::string& channel, const std::string& payload);

  boost::asio::io_context& io_;
  std::unique_ptr<Route> route_;
  ConnectionConfig config_;  // one server: its endpoint (the fast path's)
  std::string prefix_;
  ReplicaWait wait_;
  std::shared_ptr<ssl_ctx_st> tls_ctx_;  // TLS: the fast path's connections
  detail::Keyspace keyspace_;            // prefix_, the fence scope, the URL's layout
  // Subscribers by node ("host:port"): one in classic mode, one per master
  // a watched name lives on when sharded.
  std::map<std::string, std::unique_ptr<Subscriber>> subs_;
  std::vector<std::unique_ptr<Subscriber>> retired_;  // closed subscribers, kept until the backend goes
  boost::asio::steady_timer resubscribe_timer_;       // rehome_later
  static constexpr milliseconds kRehomeGap{250};
  bool rehome_armed_ = false;
  bool sharded_ = false;  // SSUBSCRIBE/SPUBLISH (a cluster that knows them); set in start()
  bool closed_ = false;
  std::map<std::string, Watch> watches_;  // by channel
  // This client's id among a name's waiters (lua/wake_lib.lua).
  const std::string waiter_id_;
  bool wake_one_ = true;
  // This client's plain waiters, woken on their personal channels.
  detail::WaiterTurns turns_;
  // Blocking connections of the fast path, per node address ("" for the
  // one server) (any thread; guarded by pool_mu_).
  static constexpr std::size_t kPoolIdle = 8;
  static constexpr milliseconds kIdleCheck{1000};  // pooled longer: checked before use
  std::mutex pool_mu_;
  std::map<std::string, std::vector<std::unique_ptr<SyncConnection>>> pools_;
  std::atomic<std::uint64_t> sync_sent_{0};
  detail::BackendEvents events_;
};

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_REDIS_BACKEND_IMPL_HPP_

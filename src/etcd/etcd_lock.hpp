// The etcd backend's class, shared by its source files: the line of keys
// (etcd_backend.cpp) and the lease that keeps them (etcd_liveness.cpp).
// Everything here runs on the client's I/O thread, except the gRPC and
// keep-alive threads' handlers, which only post to it, and the blocking
// fast path (etcd_fast_path.cpp), which reads only the atomics and
// fast_keys_ and posts the rest.
//
// The layout is etcd's own lock's, so etcdctl lock and Go's Mutex share
// lines with dlock: lock NAME is the keys under <prefix>NAME/, each a
// waiter's, put under its client's lease; the oldest (lowest create
// revision) holds, and its create revision is the fence (it grows across
// every write of the cluster, its leaders and restarts).
#ifndef DLOCK_ETCD_ETCD_LOCK_HPP_
#define DLOCK_ETCD_ETCD_LOCK_HPP_

#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "backend.hpp"
#include "core/queue_line.hpp"
#include "etcd/config.hpp"
#include "etcd/etcd_rpc.hpp"
#include "etcd/lease_keeper.hpp"

namespace dlock::etcd {

namespace asio = boost::asio;
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

inline Status cancelled() { return {Errc::cancelled, "client closed"}; }
// An attempt whose lease ended while it was out (its keys went with it).
inline Status lease_ended_meanwhile() {
  return {Errc::unavailable, "etcd: the lease ended during the attempt; a new one is asked for"};
}

// "%x" of a lease id, as etcd's Mutex names its key.
std::string lease_hex(std::int64_t lease);
// `key` as created at `create_revision` among `kvs` (a name taken again
// comes back with a later revision); null if it is not there.
const KeyValue* created_at(const std::vector<KeyValue>& kvs, const std::string& key, std::int64_t create_revision);
// The line's entries: the keys right under it (a lock "a/b" lives under
// "a/" too, and is another lock), oldest first.
std::vector<detail::QueueNode> entries_of(const std::vector<KeyValue>& keys, const std::string& prefix);
// A write with no answer may have been made: the next attempt finds its key
// by name, so for the acquire it is a retry.
Status attempt_failed(Status s);
// How long one lock transaction may take. A member frozen but connected
// holds a call to its deadline, and the client's retry after an error must
// fit in LockOptions::error_retry (2 s) to reach another member.
inline constexpr milliseconds kAttemptPatience{1000};

class EtcdBackend final : public detail::Backend {
 public:
  EtcdBackend(asio::io_context& io, EtcdBackendConfig config);
  ~EtcdBackend() override;

  detail::Capabilities capabilities() const override;
  void set_events(detail::BackendEvents events) override { events_ = std::move(events); }
  void start(StatusDone done) override;
  void close() override;

  void acquire(const AcquireCall& call, AcquireDone done) override;
  void release(const ReleaseCall& call, std::function<void(Result<ReleaseOutcome>)> done) override;
  void abandon(const AbandonCall& call, StatusDone done) override;
  void renew(const std::vector<RenewCall>&, std::function<void(Result<std::vector<RenewOutcome>>)> done) override;
  void inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) override;
  void names(const std::string& prefix, std::function<void(Result<std::vector<std::string>>)> done) override;

  // A waiter's watches are set when it answers busy: nothing to do here.
  void watch(const WatchKey&, StatusDone ready) override { post(std::move(ready), Status()); }
  void unwatch(const WatchKey&) override {}
  // Every change under the lock's line, told as released({name, 0}).
  void observe(const std::string& name, StatusDone ready) override;
  void unobserve(const std::string& name) override;

  // The blocking fast path (etcd_fast_path.cpp).
  std::optional<Result<AcquireOutcome>> acquire_now(const AcquireCall& call) override;
  std::optional<Result<ReleaseOutcome>> release_now(const ReleaseCall& call) override;

  std::uint64_t commands_sent() const override { return calls_; }
  std::uint64_t reconnects() const override { return reconnects_; }

 private:
  struct Attempt {
    std::string name, owner, info, key;
    std::int64_t lease = 0;
    std::int64_t revision = 0;  // the key's create revision, once read
    std::uint64_t grant = 0;
    detail::LockMode mode = detail::LockMode::exclusive;
    unsigned permits = 0;
    bool sent = false;                  // a put may have made the key
    int puts = 0;                       // transactions sent with this key name
    bool renamed = false;               // its first name was taken: it has its own
    bool in_line = false;               // its key was read in the line: the next look is a read
    std::vector<std::int64_t> watches;  // the keys ahead it waits for, and its own
    // What those watches confirm (see confirm_watch): keys ahead and its
    // own, with their create revisions (a name comes back with a later
    // revision when its client takes the lock again).
    std::vector<std::pair<std::string, std::int64_t>> watched;
    std::size_t unconfirmed = 0;
    std::int64_t started_at = 0;  // the earliest revision its watches of keys ahead start after
    bool watch_line = false;      // one watch of the whole line (not one per key)
    int armed = 0;                // its watches made since the attempt began (the read's check)
    // The fast path's answer, busy: the wait goes on from it, not from
    // another transaction.
    std::optional<EtcdRpc::Line> line;
  };
  struct Held {
    std::string key, name, owner;
    std::int64_t lease = 0, revision = 0;
    std::int64_t watch = 0;  // its own key's deletion
    bool shared = false;
    bool releasing = false;
  };
  // A key of this client to delete. guard: an acquire's put may still be
  // in flight (its answer was never seen) and land after the delete: the
  // key is watched from then on and deleted again if it comes back.
  struct Orphan {
    std::string key;
    std::int64_t revision = 0;  // its create revision (0: whichever)
    bool guard = false;
  };
  // What a watch id wakes.
  struct WatchFor {
    enum class Kind { attempt, hold, observer, stray } kind;
    std::uint64_t id = 0;  // the attempt or the grant
    std::string name;      // observers; a stray put's key; a waiter's watched key
  };

  template <class Done, class Value>
  void post(Done done, Value value) {
    asio::post(io_, [done = std::move(done), value = std::move(value)]() mutable { done(std::move(value)); });
  }
  // Runs `f` on the I/O thread unless the backend closed meanwhile.
  template <class F>
  void loop(F f) {
    asio::post(io_, [this, f = std::move(f)]() mutable {
      if (!closed_) f();
    });
  }
  // A deadline for one call from now.
  Clock::time_point by() const { return Clock::now() + config_.command_timeout; }
  void log(LogLevel level, const std::string& message) const;

  // ---- the line (etcd_backend.cpp) ----
  std::string line_of(const std::string& name) const { return config_.prefix + name + "/"; }
  std::string key_for(const AcquireCall& call) const;
  // The attempt's own name: <lease><mark><attempt>[-kind], never shared;
  // mark "_" on the I/O thread, "__" on the fast path (names neither side
  // takes from the other).
  std::string unique_key(const Attempt& a, std::uint64_t id, const char* mark = "_") const;
  // A name no attempt, hold, pending delete or guard of this client uses.
  bool name_in_use(const std::string& key) const;
  void drop_watches(Attempt& a);
  // A waiter's watches start from when they are made: once all are in
  // place, a look at the line finds a change made between the read and
  // then, and whether etcd may have left them to its catch-up pass.
  void confirm_watch(std::uint64_t id, const std::string& key, std::int64_t started_at);
  bool arm_watches(std::uint64_t id, Attempt& a, bool ahead_only);
  void wake(std::uint64_t id);
  void on_line(std::uint64_t id, AcquireDone done, Result<EtcdRpc::Line> line);
  // A waiter's look again (woken, or the stream back): a read, no write.
  void look_again(std::uint64_t id, Attempt& a, Clock::time_point deadline, AcquireDone done);
  // Where its key stands in the line read: granted, or watches set.
  void take_place(std::uint64_t id, AcquireDone done, const EtcdRpc::Line& line);
  void grant(std::uint64_t id, AcquireDone done);
  // A grant's hold: its key watched soon, the lease's deadline armed.
  void keep_hold(std::uint64_t grant, const Attempt& a);
  // Deletes a key of this client: retried until it is gone or its lease is.
  void remove_key(Orphan o, StatusDone done);
  // Watches a deleted key for a stray put from `from` on (at most
  // kMaxGuards, the oldest dropped; until the lease ends).
  void guard_key(const std::string& key, std::int64_t from);
  static constexpr std::size_t kMaxGuards = 1024;
  void retry_orphans();

  // ---- watches (etcd_backend.cpp) ----
  // On another member than `avoid` while one is connected.
  void open_watches(std::optional<std::size_t> avoid = std::nullopt);
  void on_news(const EtcdRpc::WatchNews& news);
  // `silent`: the member that stopped answering (the stream is opened
  // again at once, elsewhere); otherwise after kRetryDelay.
  void on_watches_ended(const Status& why, std::optional<std::size_t> silent = std::nullopt);
  // The probe's tick (etcd_watches.cpp), armed while anything is watched.
  void probe_soon();
  void probe_confirmed();
  milliseconds probe_answer() const;
  void stream_silent(Clock::duration silent);
  // A watch of `key`'s deletion from `from` (0: none if the stream is down);
  // with `range_end`, of every change in [key, range_end).
  std::int64_t watch_key(const std::string& key, std::int64_t from, WatchFor what, const std::string& range_end = {},
                         bool deletes_only = true);
  void drop_watch(std::int64_t& id);
  void watch_hold_soon(std::uint64_t grant);
  static constexpr milliseconds kHoldWatchDelay{50};
  static constexpr milliseconds kRetryDelay{500};  // leases, watch streams, deletes that failed
  // `again`: after a reopened stream or a cancelled watch: the observers
  // are told once the watch is in place (a change may have been missed).
  void arm_observer(const std::string& name, bool again);
  void observer_ready(const std::string& name);
  // Revokes `lease` (an ended one, whose keys should go now), asking again
  // until answered or `give_up` (by then it has expired anyway).
  void revoke(std::int64_t lease, Clock::time_point give_up);
  // A hold's key went while held: told as lost.
  void hold_lost(std::uint64_t grant);

  // ---- the fast path (etcd_fast_path.cpp) ----
  // Runs f on the caller's thread unless the backend closed (nullopt); close
  // waits for the calls under way.
  template <class F>
  auto with_fast(F f) -> std::optional<decltype(f())>;
  void close_fast();
  // A grant's fast key (every one: nullopt) no longer to be released there:
  // the hold was lost or undone.
  void forget_fast(std::optional<std::uint64_t> grant);
  std::optional<Result<AcquireOutcome>> fast_outcome(const AcquireCall& call, Attempt a, Result<EtcdRpc::Line> line);
  Result<AcquireOutcome> fast_grant(const AcquireCall& call, Attempt a);
  struct FastKey {
    std::string key;
    std::int64_t revision = 0;
  };

  // ---- the lease (etcd_liveness.cpp) ----
  void ask_lease();
  void on_kept(std::int64_t lease, Clock::time_point sent_at, std::int64_t ttl);
  void vouch(Clock::time_point sent_at, std::int64_t ttl_seconds);
  void arm_deadline();
  // Every hold is gone (or can no longer be vouched for): told first, then
  // the lease is revoked (its keys go with it) and a new one asked for.
  void lease_ended(LossReason reason, const std::string& why);
  // A release the server refuses for this client's rights (auth_failed,
  // permission_denied): asking again will not help.
  static bool refused_for_good(const Status& s);
  // Stops keeping the lease alive (lease_ended) so its keys go within its
  // TTL.
  void let_lease_go(const Status& refused);
  // What such a release is answered with, on either path.
  static Status refused_release(const Status& refused);
  void finish_start(Status s);

  asio::io_context& io_;
  EtcdBackendConfig config_;
  detail::BackendEvents events_;
  std::unique_ptr<EtcdRpc> rpc_;
  std::unique_ptr<LeaseKeeper> keeper_;
  std::unique_ptr<EtcdRpc::Watches> watches_;
  StatusDone start_done_;
  asio::steady_timer deadline_, lease_retry_, watch_retry_, orphan_retry_, hold_watch_timer_, probe_timer_;
  std::uint64_t stream_ = 0;              // the watch stream's number (news of an earlier one is dropped)
  bool probing_ = false;                  // probe_timer_ is armed
  Clock::time_point probe_sent_{};        // the probe out on the stream (none: {})
  bool probes_work_ = false;              // a member answered one
  std::vector<std::uint64_t> unwatched_;  // holds whose key is watched at the timer
  bool closed_ = false;
  std::int64_t lease_ = 0;  // 0: none yet (asked for)
  bool lease_asked_ = false;
  std::chrono::seconds ttl_{0};
  int said_gone_ = 0;                          // keep-alive answers in a row that said the lease is gone
  Clock::time_point until_{};                  // every hold is valid until then
  std::map<std::uint64_t, Attempt> attempts_;  // by AcquireCall::attempt
  std::map<std::uint64_t, Held> held_;         // by grant
  std::map<std::int64_t, WatchFor> watching_;  // by watch id
  struct Observer {
    unsigned refs = 0;
    std::int64_t watch = 0;
    bool in_place = false;          // its watch was confirmed by the server
    bool tell = false;              // told released({name, 0}) once in place
    std::vector<StatusDone> ready;  // observe() calls waiting for it
  };
  std::map<std::string, Observer> observers_;
  std::multiset<std::string> deleting_;          // keys whose delete is out
  std::vector<Orphan> orphans_;                  // keys to delete again
  std::map<std::string, std::int64_t> guarded_;  // key -> its stray-put watch
  std::int64_t next_watch_ = 1;
  std::atomic<std::uint64_t> calls_ = 0;
  std::uint64_t reconnects_ = 0;
  // What the fast path reads of the I/O thread's state: lease_ and until_.
  std::atomic<std::int64_t> lease_now_{0};
  std::atomic<Clock::rep> until_now_{0};
  std::mutex fast_mu_;
  std::condition_variable fast_cv_;
  int fast_busy_ = 0;                           // under fast_mu_: calls on callers' threads
  bool fast_closed_ = true;                     // under fast_mu_: until started, and once closed
  std::map<std::uint64_t, FastKey> fast_keys_;  // under fast_mu_: fast grants by grant, until released
  // Under fast_mu_: fast grants whose delete is out on a caller's thread,
  // until the I/O thread has heard how it ended. Their key's deletion,
  // seen first by the hold's watch, is their release, not a loss.
  std::set<std::uint64_t> fast_releasing_;
  bool fast_releasing(std::uint64_t grant) {
    std::lock_guard lk(fast_mu_);
    return fast_releasing_.count(grant) != 0;
  }
};

}  // namespace dlock::etcd

#endif  // DLOCK_ETCD_ETCD_LOCK_HPP_

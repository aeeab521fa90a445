// The engine behind Client, Lease and Mutex: owns the I/O thread and the
// backend, drives the acquire state machines, keeps the registry of held
// locks, runs the renewal watchdog and dispatches release notifications.
//
// Threading: the public entry points may be called from any thread; they
// post to the I/O thread. Everything below "I/O thread only" is touched only
// there, so it needs no locks.
#ifndef DLOCK_CLIENT_CORE_HPP_
#define DLOCK_CLIENT_CORE_HPP_

#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "backend.hpp"
#include "core/acquire_fsm.hpp"
#include "core/renewal_scheduler.hpp"
#include "dlock/client.hpp"
#include "dlock/lease.hpp"

namespace dlock::detail {

// What this client holds of one lock for one owner in one mode (shared by
// its Leases).
struct Hold {
  Hold(std::string n, std::string o, LockMode m = LockMode::exclusive)
      : name(std::move(n)), owner(std::move(o)), mode(m) {}
  const std::string name;
  const std::string owner;
  const LockMode mode;
  // Read from any thread.
  std::atomic<std::uint64_t> fence{0};
  std::atomic<unsigned> depth{0};
  std::atomic<std::int64_t> valid_until_ns{0};  // steady_clock ticks
  std::atomic<bool> lost{false};
  std::stop_source lost_source;
  // Who orders this hold's calls. kFast: granted on a caller's thread and
  // touched by nothing else since, so its release may take the fast path
  // too. kFastReleasing: such a release claimed it and is out.
  // kFastAwaited: the same, and the I/O thread has queued calls that wait
  // for its end (fast_release_done). kIo: the I/O thread's queue orders every
  // call from now on. Claimed by compare-and-swap, so a fast release and a
  // re-entry of one shared Mutex can never both send `held = 1`, and a fast
  // release that nobody awaits ends without waking the I/O thread.
  enum Order : std::uint8_t { kIo, kFast, kFastReleasing, kFastAwaited };
  std::atomic<std::uint8_t> order{kIo};
  std::atomic<bool> releasing{false};  // a fast release is out: renewals ignore it

  // I/O thread only.
  std::uint64_t grant = 0;  // the grant held (BackendCall::grant), while depth > 0
  bool stray = false;       // an acquire of this grant may still be in the network
  RenewalScheduler::Id id = 0;
  unsigned users = 0;  // acquire calls in progress for this hold
  bool op_busy = false;
  // Script calls waiting their turn (a vector: an empty deque still
  // allocates, and most holds never queue anything).
  std::vector<std::function<void()>> ops;
  std::function<void(LossReason)> on_lost;
  milliseconds lease{0};
  bool line = false;  // granted through the name's line (RenewCall::line)
};

// What kind of hold an acquire asks for: a plain lock, a read lock (shared,
// permits 0) or a semaphore permit (shared, permits N). LockOptions::fair,
// and any shared hold, make it wait in the name's line.
struct Shape {
  LockMode mode = LockMode::exclusive;
  unsigned permits = 0;
};

// Where a blocking acquire that left the fast path starts from.
struct AcquireSeed {
  Shape shape;
  std::uint64_t grant = 0;  // 0: a new one
  bool stray = false;       // a fast attempt under `grant` has an unknown outcome
  Status error;             // the fast attempt's transient failure: counts as the first
  // The fast attempt's id when its busy answer kept a place in a queue, or
  // when it was a wait's and got no answer (it may have joined the waiters):
  // the wait goes on under it (and abandons it if it ends without a grant).
  std::uint64_t attempt = 0;
  // When the call began (the fast attempt's start): its wait counts from
  // then. Default: when the asynchronous acquire starts.
  std::chrono::steady_clock::time_point started{};
};

class ClientCore;

// Makes Clients over a given core (Client's constructor is private).
struct ClientFactory {
  static Client make(std::shared_ptr<ClientCore> core) { return Client(std::move(core)); }
};

Result<Lease> blocking_acquire(ClientCore& core, std::string name, milliseconds wait, const LockOptions& options,
                               bool fresh_owner, Shape shape = {});
// The asynchronous acquire, waited for (the slow path of blocking calls).
Result<Lease> acquire_and_wait(ClientCore& core, std::string name, milliseconds wait, const LockOptions& options,
                               struct AcquireSeed seed);

class ClientCore : public std::enable_shared_from_this<ClientCore> {
 public:
  using Clock = std::chrono::steady_clock;

  // The handle's deleter shuts the core down and deletes it only once its
  // I/O loop has drained (backend.hpp's lifetime rule).
  static Result<std::shared_ptr<ClientCore>> connect(std::string_view url, ClientOptions options);
  // Over the backend `make` builds on the core's I/O loop (tests: a fake).
  using BackendMaker = std::function<std::unique_ptr<Backend>(boost::asio::io_context&)>;
  // Where the core reads the time for its decisions (validity, late grants,
  // deadlines); tests move it forward instead of sleeping. Timers still wait
  // on the steady clock, so a test clock must not run slower than it.
  using ClockFn = std::function<Clock::time_point()>;
  static Result<std::shared_ptr<ClientCore>> connect_with(const BackendMaker& make, ClientOptions options,
                                                          ClockFn clock = {});
  ClientCore(const ClientCore&) = delete;
  ClientCore& operator=(const ClientCore&) = delete;

  void acquire(std::string name, milliseconds wait, LockOptions options, std::function<void(Result<Lease>)> done,
               AcquireSeed seed = {});
  // Blocking calls on the caller's own thread (no hand-off to the I/O
  // thread) where the backend offers it. acquire_now needs an owner nobody
  // holds through this client (a fresh one); nullopt means "go the
  // asynchronous way, from `seed`". REQUIRES: not on the I/O thread.
  std::optional<Result<Lease>> acquire_now(const std::string& name, milliseconds wait, const LockOptions& options,
                                           AcquireSeed& seed);
  std::optional<Status> release_now(const std::shared_ptr<Hold>& hold);
  void release(std::shared_ptr<Hold> hold, std::function<void(Status)> done);
  void inspect(std::string name, std::function<void(Result<LockInfo>)> done);
  // Names that may be held under `prefix` (Backend::names).
  void names(std::string prefix, std::function<void(Result<std::vector<std::string>>)> done);
  // What a grant made with `o` stores of its holder (AcquireCall::info).
  std::string holder_info(const LockOptions& o) const;
  // Calls on_change (on the I/O thread) with the lock's state now and each
  // time its holder changes (held, fence or holder info). Returns (off the
  // I/O thread) once the watch is placed and the first look answered, with
  // an id for unobserve, which returns once no call of on_change runs any more (at
  // once on the I/O thread itself).
  std::uint64_t observe(std::string name, std::function<void(const LockInfo&)> on_change);
  void unobserve(std::uint64_t id);
  // Runs done(status) on the I/O thread.
  void deliver(std::function<void(Status)> done, Status status);

  ClientStats stats() const;
  const ClientOptions& options() const { return options_; }
  bool on_io_thread() const { return std::this_thread::get_id() == io_thread_id_; }
  void log(LogLevel level, const std::string& message) const;
  void count_release_failure() { release_failures_.fetch_add(1, std::memory_order_relaxed); }

 private:
  struct AcquireOp;
  struct ReleaseOp;
  struct Observer;
  void look(const std::shared_ptr<Observer>& obs);  // inspects, and tells a change
  void observers_of(const std::string& name);       // a release or hand-over of `name`
  struct Runtime;

  explicit ClientCore(ClientOptions options);
  Clock::time_point now() const { return clock_ ? clock_() : Clock::now(); }
  ~ClientCore() = default;
  // The deleter of every handle: shuts down, then deletes after the drain.
  static void destroy(ClientCore* core) noexcept;
  static Result<std::shared_ptr<ClientCore>> start(std::shared_ptr<ClientCore> core);
  void shutdown_io();  // I/O thread: frees what is held, fails what waits
  void finish_close();
  // One of shutdown's calls (or a cleanup it found out) was answered.
  void closing_call_done();

  // I/O thread only.
  std::shared_ptr<Hold> find_or_add_hold(const std::string& name, const std::string& owner, LockMode mode);
  // The call goes through the name's line (AcquireCall::queued): every
  // shared one, and a fair one where the backend is not fair anyway.
  bool queued(const LockOptions& o, Shape shape) const;
  void maybe_forget(const std::shared_ptr<Hold>& hold);
  void hold_exec(const std::shared_ptr<Hold>& hold, std::function<void()> op);
  void hold_op_done(const std::shared_ptr<Hold>& hold);
  void run_next_op(const std::shared_ptr<Hold>& hold);
  void step(const std::shared_ptr<AcquireOp>& op, AcquireFsm::Action action);
  void start_watch(const std::shared_ptr<AcquireOp>& op, AcquireFsm::time_point until);
  // (Re)arms the op's timer: at `until` the FSM is woken (replaces a wait
  // armed before).
  void wake_at(const std::shared_ptr<AcquireOp>& op, AcquireFsm::time_point until);
  void send_attempt(const std::shared_ptr<AcquireOp>& op);
  void on_attempt_answer(const std::shared_ptr<AcquireOp>& op, Result<AcquireOutcome> r, Clock::time_point sent_at);
  void finish(const std::shared_ptr<AcquireOp>& op, Status status);
  void on_release_published(const std::string& name, std::uint64_t attempt = 0);
  void on_handed(const HandOver& to);
  void wake_all();
  void granted(const std::shared_ptr<AcquireOp>& op, const AcquireOutcome& outcome, Clock::time_point sent_at);
  void wake_same_owner(const std::shared_ptr<AcquireOp>& op);
  void set_backend_events();
  void on_holds_lost(const std::vector<HoldRef>& refs, LossReason reason);
  void on_alive_until(Clock::time_point until);
  void mark_lost(const std::shared_ptr<Hold>& hold, LossReason reason);
  void rearm_renewal();
  void on_renewal_timer();
  void release_io(std::shared_ptr<Hold> hold, std::function<void(Status)> done);
  void send_release(const std::shared_ptr<ReleaseOp>& op);
  void end_release(const std::shared_ptr<ReleaseOp>& op, unsigned depth, Status status);
  // Tells the backend an acquire ended without a grant (in its hold's queue
  // of calls, so it cannot overtake the attempt).
  // `lease`: the abandoned attempt's, how long a grant it made could last.
  void abandon(const std::shared_ptr<Hold>& hold, AbandonCall call, milliseconds lease);
  void abandon_until(const std::shared_ptr<Hold>& hold, AbandonCall call, Clock::time_point give_up,
                     milliseconds backoff);
  AbandonCall abandon_call(const AcquireOp& op, bool in_doubt) const;
  void run_on_lost(const std::shared_ptr<Hold>& hold, LossReason reason);
  void stage(std::shared_ptr<Hold> hold, Clock::time_point sent_at, milliseconds interval, bool renew,
             std::uint64_t session_ends);
  void adopt_staged();
  void retire(const std::shared_ptr<Hold>& hold);
  void fast_release_done(const std::shared_ptr<Hold>& hold);
  // ClientStats: a wait that ended (I/O thread), and ClientOptions::on_stats.
  void count_wait(const AcquireOp& op, const Status& status);
  void arm_stats(Clock::time_point at);

  template <class F>
  void post(F&& f);

  ClientOptions options_;
  // "PROGRAM[PID]@HOST", built once: a grant's description without a
  // getpid() system call per acquire.
  const std::string default_holder_;
  ClockFn clock_;                // empty: Clock::now (set before the I/O thread starts)
  std::shared_ptr<Runtime> rt_;  // io_context + thread; may outlive *this; set once
  std::thread::id io_thread_id_;
  std::unique_ptr<Backend> backend_;
  Capabilities caps_;  // backend_'s, read once

  // I/O thread only.
  using HoldKey = std::tuple<std::string, std::string, LockMode>;  // name, owner, mode
  std::map<HoldKey, std::shared_ptr<Hold>> holds_;
  std::map<RenewalScheduler::Id, std::weak_ptr<Hold>> scheduled_;
  RenewalScheduler::Id next_id_ = 1;
  RenewalScheduler scheduler_;
  std::unique_ptr<boost::asio::steady_timer> renew_timer_;
  std::map<std::string, std::list<std::shared_ptr<AcquireOp>>> waiters_;
  std::set<std::shared_ptr<AcquireOp>> live_ops_;  // every acquire not yet finished
  std::map<std::uint64_t, std::shared_ptr<Observer>> observers_;
  std::atomic<std::uint64_t> next_observer_{1};
  std::atomic<std::uint64_t> next_grant_;       // grant ids: random start, then +1
  std::atomic<std::uint64_t> next_attempt_{1};  // AcquireCall::attempt ids (the fast path draws too)
  // Backends without renewal: when the session's holds stop being valid.
  Clock::time_point session_until_ = Clock::time_point::max();
  // A fast grant can be made on a session that ends before the caller's
  // thread stages it: the backend's loss finds nothing to tell. Every
  // session end is counted, and a grant staged across one is lost when
  // adopted; so is a grant a loss named before it was staged.
  std::atomic<std::uint64_t> session_ends_{0};
  LossReason session_end_reason_ = LossReason::expired;  // the newest one's
  std::map<std::uint64_t, LossReason> lost_unstaged_;    // by grant id, bounded

  // Fast-path grants waiting for the I/O thread to adopt them (into holds_
  // and the scheduler). It adopts at its next wake-up, and is woken early
  // only if one is due before the timer it armed.
  struct Staged {
    std::shared_ptr<Hold> hold;
    Clock::time_point sent_at;
    milliseconds interval;
    bool renew;
    std::uint64_t session_ends;  // session_ends_ before the backend was asked
  };
  std::mutex stage_mu_;
  std::vector<Staged> staged_;                               // guarded by stage_mu_
  Clock::time_point armed_ = Clock::time_point::max();       // guarded by stage_mu_
  Clock::time_point staged_due_ = Clock::time_point::max();  // guarded by stage_mu_
  bool closing_ = false;                                     // shutdown_io() ran: handlers still queued do nothing
  bool warned_blind_ = false;                                // logged once that waiters poll
  std::size_t closing_releases_ = 0;                         // shutdown's releases not yet answered
  std::size_t abandons_out_ = 0;                             // cleanups sent, not yet answered (close waits)
  std::unique_ptr<boost::asio::steady_timer> close_timer_;   // bounds them
  bool closed_ = false;                                      // finish_close() ran

  std::atomic<std::uint64_t> grants_{0};
  std::atomic<std::uint64_t> late_grants_{0};
  std::atomic<std::uint64_t> renewal_round_trips_{0};
  std::atomic<std::uint64_t> leases_lost_{0};
  std::atomic<std::uint64_t> release_failures_{0};
  std::atomic<std::uint64_t> wakeups_{0};
  std::atomic<std::uint64_t> leases_held_{0};
  mutable std::atomic<std::uint64_t> commands_sent_{0};
  mutable std::atomic<std::uint64_t> reconnects_{0};
  std::atomic<std::uint64_t> busy_answers_{0};
  std::atomic<std::uint64_t> renewals_{0};
  std::atomic<std::uint64_t> renewal_failures_{0};
  std::atomic<std::uint64_t> outcome_unknown_{0};
  std::array<std::atomic<std::uint64_t>, 4> lost_by_reason_{};  // indexed by LossReason
  // I/O thread only (stats() copies them there, so a snapshot adds up).
  std::uint64_t waits_granted_ = 0;
  std::uint64_t waits_timed_out_ = 0;
  std::uint64_t waits_failed_ = 0;
  std::uint64_t wait_time_us_sum_ = 0;
  decltype(ClientStats::wait_buckets) wait_buckets_{};
  std::string backend_name_;                                // ClientStats::backend; set before start
  std::unique_ptr<boost::asio::steady_timer> stats_timer_;  // ClientOptions::on_stats
  // Cleanups waiting to be sent again (abandon_until); shutdown sends them.
  std::map<std::shared_ptr<boost::asio::steady_timer>, AbandonCall> abandon_timers_;
  std::vector<AbandonCall> abandons_queued_at_close_;  // shutdown_io() drains the holds' queues into it
};

}  // namespace dlock::detail

#endif  // DLOCK_CLIENT_CORE_HPP_

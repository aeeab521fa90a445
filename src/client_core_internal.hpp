// Private to ClientCore's implementation files (client_core*.cpp): the
// operation records, the runtime, and helpers more than one of them uses.
#ifndef DLOCK_CLIENT_CORE_INTERNAL_HPP_
#define DLOCK_CLIENT_CORE_INTERNAL_HPP_

#include <boost/asio/post.hpp>
#include <utility>

#include "client_core.hpp"

namespace dlock::detail {

namespace asio = boost::asio;
using boost::system::error_code;

// To the logger, else warnings and errors to stderr; never throws.
void emit(const Logger& logger, LogLevel level, const std::string& message);
// invalid_argument naming the bad field, or ok.
Status check_lock_options(const LockOptions& o, milliseconds wait);
// Every check an acquire makes before any I/O: name, options, owner (when
// set), and a fixed lease only where leases are renewed: a session backend's
// hold lives as long as its session. invalid_argument naming what is wrong,
// or ok.
Status check_acquire(const std::string& name, milliseconds wait, const LockOptions& o, const Capabilities& caps);
// What a release's answer means for the caller: the depth left here and the
// status to report (tries: how many times it was re-sent).
std::pair<unsigned, Status> release_result(const Result<ReleaseOutcome>& r, unsigned held, int tries,
                                           const std::string& name);

inline std::int64_t ticks(std::chrono::steady_clock::time_point t) { return t.time_since_epoch().count(); }

struct ClientCore::Runtime {
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::thread thread;
  // Set when the last handle was dropped on the I/O thread itself: the
  // thread deletes the core once its loop has drained.
  ClientCore* orphan = nullptr;
};

// How long a try (wait 0) waits for the server's answer: a round trip at
// all (command_timeout), and a lost reply settled by retrying (error_retry).
inline milliseconds try_budget(const ClientOptions& c, const LockOptions& o) {
  return std::max(c.command_timeout, o.error_retry);
}

struct ClientCore::AcquireOp {
  AcquireOp(asio::io_context& io, Clock::time_point now, milliseconds wait, milliseconds retry,
            milliseconds reply_budget)
      : fsm(now, wait, retry, reply_budget), timer(io), answer_timer(io) {}
  std::string name;
  LockOptions opts;
  milliseconds lease{0};
  milliseconds interval{0};
  bool renew = true;
  std::shared_ptr<Hold> hold;
  AcquireFsm fsm;
  asio::steady_timer timer;
  asio::steady_timer answer_timer;  // at fsm.answer_by(): an attempt still out ends the call
  std::function<void(Result<Lease>)> done;
  bool in_waiters = false;
  bool watching = false;
  bool woken = false;  // a release notification was handed to this op
  bool finished = false;
  std::uint64_t attempt = 0;      // AcquireCall::attempt of every attempt of this op
  bool sent_any = false;          // an attempt reached the backend: abandon when it fails
  std::uint64_t fresh_grant = 0;  // the grant id this op asks for when not re-entering
  // The last attempt sent: its depth and grant (for an undo), and whether it
  // is still unanswered.
  unsigned sent_held = 0;
  std::uint64_t sent_grant = 0;
  bool in_flight = false;
  bool stray = false;  // a fresh attempt's reply was lost: a copy may still arrive
  Shape shape;
  bool queued = false;  // AcquireCall::queued
  // Send time of the newest attempt answered busy: a hand-over that arrives
  // after it was made after it, so the lease counts from there.
  Clock::time_point busy_sent_at{};
  // A hand-over to another waiter arrived while this op's attempt was out:
  // the wait after that attempt's answer (which may predate it) ends by
  // then, the recipient's lease, as for the waiters that were not attempting.
  Clock::time_point wake_by = Clock::time_point::max();
  // When the call began, and whether it may wait (wait > 0): a busy answer
  // then makes it a wait (ClientStats::waits_*, the wait-time histogram).
  Clock::time_point started{};
  bool may_wait = false;
};

struct ClientCore::ReleaseOp {
  std::shared_ptr<Hold> hold;
  std::function<void(Status)> done;
  int tries = 0;
};

template <class F>
void ClientCore::post(F&& f) {
  asio::post(rt_->io, std::forward<F>(f));
}

}  // namespace dlock::detail

#endif  // DLOCK_CLIENT_CORE_INTERNAL_HPP_

// The acquire algorithm for one acquire() call, as an I/O-free state machine.
//
// The caller feeds it events (replies, subscription confirmations, wake-ups,
// timer expiries) with the current steady-clock time and performs the action
// it returns. Algorithm:
//   1. attempt (one atomic script call);
//   2. busy -> subscribe to the lock's release channel (watch), and once the
//      subscription is confirmed attempt again: a release between the busy
//      reply and the subscription is thereby never missed;
//   3. still busy -> sleep until a release is published or the holder's
//      remaining lease (the busy answer's WaitHint) runs out, capped by the
//      wait deadline; attempt. A release published while an attempt is in
//      flight makes a busy answer retry at once (it may predate the release).
//   4. granted -> done, unless the reply came back after the lease's
//      validity (the client was paused, the reply held up): then the key may
//      already have expired and gone to someone else, so the grant is undone
//      (Action::undo) and counts as a failed attempt.
//   A busy answer that cannot promise a wake-up (WaitHint::poll: a peer
//   library releases without publishing) polls from 2 ms doubling to 64 ms,
//   each nap drawn from its upper half (jitter, so waiters spread out), and
//   never past the holder's expiry; a published release still wakes it.
//   Transient errors (unavailable, outcome_unknown) are retried with backoff
//   for up to error_retry; an outcome_unknown leaves the call in doubt until a
//   later reply settles it (the script is idempotent).
#ifndef DLOCK_CORE_ACQUIRE_FSM_HPP_
#define DLOCK_CORE_ACQUIRE_FSM_HPP_

#include <chrono>
#include <cstdint>
#include <optional>

#include "core/wait_hint.hpp"
#include "dlock/error.hpp"
#include "dlock/options.hpp"

namespace dlock::detail {

class AcquireFsm {
 public:
  using Clock = std::chrono::steady_clock;
  using time_point = Clock::time_point;

  struct Action {
    enum class Kind {
      attempt,  // send the acquire script now
      watch,    // subscribe to releases, then call on_watch_ready; call
                // on_wake at `until` (the wait's deadline) if still pending
      wait,     // sleep until `until` or a wake-up, then call on_wake
      done,     // finished: `status` ok = granted
      none,     // nothing to do (a stray wake-up)
    };
    Kind kind = Kind::attempt;
    time_point until{};
    Status status;
    // Before acting: undo the grant the last attempt made (it came too late).
    bool undo = false;
  };

  // wait: how long to wait for a busy lock (kForever, or 0 = try once).
  // reply_budget: how long a try (wait 0) waits for an answer (see answer_by).
  AcquireFsm(time_point now, milliseconds wait, milliseconds error_retry, milliseconds reply_budget = milliseconds(0));

  Action start();
  // Granted by the attempt sent at `sent_at`; fresh: a first level (a
  // re-entry extends a hold already valid, so it cannot be late).
  Action on_granted(time_point now, time_point sent_at, milliseconds lease, bool fresh);
  // Another owner holds it; the hint says how long it may keep it.
  Action on_busy(time_point now, WaitHint hint);
  // A re-entry found this owner's hold gone.
  Action on_lost();
  // Any failure of the attempt.
  Action on_error(time_point now, const Status& error);
  // The subscription is confirmed (subscribed), or could not be made
  // (refused by an ACL, no connection): waiting then polls, from 10 ms
  // doubling to 500 ms, each nap capped by the holder's remaining lease.
  // After a busy answer hinted `watched` (the attempt itself set what wakes
  // it), a confirmed subscription is waited on, not followed by an attempt,
  // unless a release was published meanwhile.
  Action on_watch_ready(time_point now, bool subscribed = true);
  // A release was published, or the wait's deadline passed. While an
  // attempt is in flight it is remembered for that attempt's answer.
  Action on_wake(time_point now);

  // When an attempt out now must have been answered, and an attempt in
  // doubt settled: the wait's deadline, or for a try (wait 0) the reply
  // budget after the call began (a server needs a round trip to answer at
  // all). max(): never (wait forever).
  time_point answer_by() const;
  // answer_by passed with the attempt still out: the server did not answer
  // in time (alive but silent, or cut off). Ends with timeout, the attempt
  // in doubt (the caller undoes whatever it may have done). A server known
  // down (every earlier attempt of the call failed outright, none left in
  // doubt) stays an error: the last one.
  Action on_no_answer(time_point now);

  // An attempt's outcome is unknown and no later reply settled it: the lock
  // may be held by this owner on the server. The caller cleans up.
  bool in_doubt() const { return in_doubt_; }
  bool watching() const { return watching_; }
  bool finished() const { return finished_; }
  bool attempting() const { return attempting_; }
  // Grants whose reply came back too late (undone).
  unsigned late_grants() const { return late_grants_; }

 private:
  Action done(Status s);
  Action attempt();
  // After errors: when retrying ends (error_retry, or the wait's deadline),
  // and the call's end then (timeout when the server left it in doubt).
  time_point give_up_at() const;
  Action given_up();
  time_point start_;
  time_point deadline_;  // of the wait
  milliseconds reply_budget_;
  bool forever_;
  milliseconds wait_;
  milliseconds error_retry_;
  std::optional<time_point> first_error_;
  milliseconds error_backoff_{0};
  bool watching_ = false;
  bool watch_pending_ = false;  // watch asked for, on_watch_ready not yet seen
  bool watched_ = false;        // the busy answer that asked for it hinted watched
  bool woken_pending_ = false;  // a release published while it was pending
  bool blind_ = false;          // no release notifications: poll
  milliseconds poll_{0};
  milliseconds peer_poll_{0};  // WaitHint::poll's backoff
  std::uint64_t jitter_;       // xorshift state, seeded from the start time
  milliseconds jittered(milliseconds nap);
  bool waiting_ = false;
  bool attempting_ = false;       // an attempt is out, its answer not yet seen
  bool woken_in_flight_ = false;  // a release was published meanwhile
  unsigned late_grants_ = 0;
  bool in_doubt_ = false;
  bool finished_ = false;
  Status last_error_;
};

}  // namespace dlock::detail

#endif  // DLOCK_CORE_ACQUIRE_FSM_HPP_

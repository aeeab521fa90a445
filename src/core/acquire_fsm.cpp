#include "core/acquire_fsm.hpp"

#include <algorithm>

#include "core/transient.hpp"
#include "core/validity.hpp"

namespace dlock::detail {
namespace {
constexpr milliseconds kNoExpiryPoll{1000};  // holder set no TTL: re-check this often
constexpr milliseconds kBackoffMin{10};
constexpr milliseconds kBackoffMax{500};
constexpr milliseconds kPollMin{10};  // waiting without release notifications
constexpr milliseconds kPollMax{500};
constexpr milliseconds kTryGrace{50};
constexpr milliseconds kPeerPollMin{2};  // WaitHint::poll
constexpr milliseconds kPeerPollMax{64};
constexpr milliseconds kWatchedNap{24LL * 3600 * 1000};  // no poll: a day, or the deadline

}  // namespace

AcquireFsm::AcquireFsm(time_point now, milliseconds wait, milliseconds error_retry, milliseconds reply_budget)
    : start_(now),
      reply_budget_(reply_budget),
      forever_(to_wait(wait) == kForever),
      wait_(wait),
      error_retry_(std::min(error_retry, kMaxLease)),
      jitter_(static_cast<std::uint64_t>(now.time_since_epoch().count()) | 1) {
  deadline_ = forever_ ? time_point::max() : now + std::max(wait, milliseconds(0));
}

AcquireFsm::Action AcquireFsm::start() { return attempt(); }

AcquireFsm::Action AcquireFsm::attempt() {
  waiting_ = false;
  attempting_ = true;
  woken_in_flight_ = false;
  return {Action::Kind::attempt, {}, {}};
}

AcquireFsm::Action AcquireFsm::done(Status s) {
  finished_ = true;
  waiting_ = false;
  attempting_ = false;
  return {Action::Kind::done, {}, std::move(s)};
}

AcquireFsm::Action AcquireFsm::on_granted(time_point now, time_point sent_at, milliseconds lease, bool fresh) {
  attempting_ = false;
  in_doubt_ = false;
  if (fresh && now >= valid_until(sent_at, lease)) {
    ++late_grants_;
    const auto late_ms = std::chrono::duration_cast<milliseconds>(now - sent_at).count();
    Action a = on_error(now, Status(Errc::unavailable, "the grant's reply arrived " + std::to_string(late_ms) +
                                                           " ms after the request, past the lease's validity; "
                                                           "it was released"));
    a.undo = true;
    return a;
  }
  return done({});
}

AcquireFsm::Action AcquireFsm::on_lost() {
  attempting_ = false;
  in_doubt_ = false;
  return done({Errc::lease_lost, "this owner's hold on the lock is gone (expired or deleted); not re-acquired"});
}

AcquireFsm::Action AcquireFsm::on_busy(time_point now, WaitHint hint) {
  attempting_ = false;
  in_doubt_ = false;
  first_error_.reset();
  error_backoff_ = milliseconds(0);
  if (now >= deadline_) {
    if (wait_.count() <= 0) return done({Errc::busy, "the lock is held by another owner"});
    return done({Errc::timeout,
                 "the lock was still held by another owner after waiting " + std::to_string(wait_.count()) + " ms"});
  }
  if (!watching_) {
    watching_ = true;
    watch_pending_ = true;
    watched_ = hint.kind == WaitHint::Kind::watched;
    woken_pending_ = false;
    // The deadline holds while the subscription is being made, however long
    // that takes (a refused or unreachable subscription never confirms).
    return {Action::Kind::watch, deadline_, {}};
  }
  // A release published while this attempt was out may be older than the
  // busy answer or newer: try again rather than sleep through it.
  if (std::exchange(woken_in_flight_, false)) return attempt();
  milliseconds nap{0};
  switch (hint.kind) {
    case WaitHint::Kind::expiry:
      nap = std::max(hint.after, milliseconds(0)) + milliseconds(1);
      break;
    case WaitHint::Kind::event:
      nap = kNoExpiryPoll;
      break;
    case WaitHint::Kind::retry:
      nap = std::max(hint.after, milliseconds(0));
      break;
    case WaitHint::Kind::watched:
      nap = kWatchedNap;
      break;  // woken by the watch or a resync
    case WaitHint::Kind::poll:
      peer_poll_ = peer_poll_.count() == 0 ? kPeerPollMin : std::min(peer_poll_ * 2, kPeerPollMax);
      nap = jittered(peer_poll_);
      if (hint.after.count() >= 0) nap = std::min(nap, hint.after + milliseconds(1));
      break;
  }
  if (blind_) {
    poll_ = poll_.count() == 0 ? kPollMin : std::min(poll_ * 2, kPollMax);
    if (nap.count() <= 0 || nap > poll_) nap = poll_;
  }
  waiting_ = true;
  return {Action::Kind::wait, std::min(deadline_, now + nap), {}};
}

// A nap in [nap/2, nap]: waiters that polled together drift apart.
milliseconds AcquireFsm::jittered(milliseconds nap) {
  jitter_ ^= jitter_ << 13;
  jitter_ ^= jitter_ >> 7;
  jitter_ ^= jitter_ << 17;
  const auto half = nap.count() / 2;
  return milliseconds(nap.count() - half + static_cast<long long>(jitter_ % static_cast<std::uint64_t>(half + 1)));
}

AcquireFsm::Action AcquireFsm::on_error(time_point now, const Status& error) {
  attempting_ = false;
  if (error.code() == Errc::outcome_unknown) in_doubt_ = true;
  if (!transient(error.code())) return done(error);
  if (!first_error_) first_error_ = now;
  // The call ends by its deadline whatever happens. An attempt still in
  // doubt then is undone by the caller (AbandonCall::in_doubt), so the
  // server's silence is reported as timeout: the lock is not this caller's.
  last_error_ = error;
  const time_point give_up = give_up_at();
  if (now >= give_up) return given_up();
  error_backoff_ = error_backoff_.count() == 0 ? kBackoffMin : std::min(error_backoff_ * 2, kBackoffMax);
  waiting_ = true;
  return {Action::Kind::wait, std::min(give_up, now + error_backoff_), {}};
}

AcquireFsm::time_point AcquireFsm::give_up_at() const {
  // In doubt, the attempt is settled (retried: the lock may be ours) until
  // the call must answer; otherwise errors end the wait at its deadline.
  const time_point end = in_doubt_ && !forever_ ? answer_by() : deadline_;
  return std::min(*first_error_ + error_retry_, std::max(end, *first_error_));
}

AcquireFsm::Action AcquireFsm::given_up() {
  const std::string& why = last_error_.message();
  if (in_doubt_ && give_up_at() < *first_error_ + error_retry_)
    return done({Errc::timeout, "no answer from the server within the wait of " + std::to_string(wait_.count()) +
                                    " ms (" + why + ")"});
  return done(in_doubt_ ? Status(Errc::outcome_unknown, "acquire outcome unknown after retrying for " +
                                                            std::to_string(error_retry_.count()) + " ms: " + why)
                        : last_error_);
}

AcquireFsm::time_point AcquireFsm::answer_by() const {
  if (forever_) return time_point::max();
  // A try's budget leaves the backend a moment to report its own timeout
  // first (a request never sent, to a server known down, is an error).
  return wait_.count() > 0 ? deadline_ : start_ + reply_budget_ + kTryGrace;
}

AcquireFsm::Action AcquireFsm::on_no_answer(time_point now) {
  if (finished_) return {Action::Kind::none, {}, {}};
  if (!attempting_) return on_wake(now);  // between attempts: the deadline ends the wait
  const bool known_down = first_error_ && !in_doubt_;
  in_doubt_ = true;
  if (known_down) return done(last_error_);
  return done({Errc::timeout, wait_.count() > 0 ? "no answer from the server within the wait of " +
                                                      std::to_string(wait_.count()) + " ms"
                                                : "no answer from the server to the try"});
}

AcquireFsm::Action AcquireFsm::on_watch_ready(time_point now, bool subscribed) {
  if (!watch_pending_ || finished_) return {Action::Kind::none, {}, {}};
  watch_pending_ = false;
  blind_ = !subscribed;
  // The backend's busy answer set its own watches as it read the line: an
  // attempt now would only read it again, unless a release was published
  // meanwhile (or while that attempt was out): it may be the one awaited.
  if (watched_ && subscribed && !woken_pending_ && !woken_in_flight_) {
    waiting_ = true;
    return {Action::Kind::wait, std::min(deadline_, now + kWatchedNap), {}};
  }
  woken_in_flight_ = false;
  return attempt();
}

AcquireFsm::Action AcquireFsm::on_wake(time_point now) {
  if (finished_) return {Action::Kind::none, {}, {}};
  if (watch_pending_) {
    if (now < deadline_) {
      woken_pending_ = true;
      return {Action::Kind::none, {}, {}};
    }
    watch_pending_ = false;
    return done({Errc::timeout,
                 "the lock was still held by another owner after waiting " + std::to_string(wait_.count()) + " ms"});
  }
  if (attempting_) {
    woken_in_flight_ = true;
    return {Action::Kind::none, {}, {}};
  }
  if (!waiting_) return {Action::Kind::none, {}, {}};
  if (now >= deadline_ && !first_error_)
    return done({Errc::timeout,
                 "the lock was still held by another owner after waiting " + std::to_string(wait_.count()) + " ms"});
  if (first_error_ && now >= give_up_at()) return given_up();  // no attempt past the deadline
  return attempt();
}

}  // namespace dlock::detail

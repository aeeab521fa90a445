#include "core/acquire_fsm.hpp"
#include "core/transient.hpp"
#include "core/validity.hpp"

#include <algorithm>

namespace dlock::detail {
namespace {
constexpr milliseconds kNoExpiryPoll{1000};  // holder set no TTL: re-check this often
constexpr milliseconds kBackoffMin{10};
constexpr milliseconds kBackoffMax{500};
constexpr milliseconds kPollMin{10};  // waiting without release notifications
constexpr milliseconds kPollMax{500};

}  // namespace

AcquireFsm::AcquireFsm(time_point now, milliseconds wait, milliseconds error_retry)
    : forever_(to_wait(wait) == kForever), wait_(wait), error_retry_(std::min(error_retry, kMaxLease)) {
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
    return done({Errc::timeout, "the lock was still held by another owner after waiting " +
                                    std::to_string(wait_.count()) + " ms"});
  }
  if (!watching_) {
    watching_ = true;
    watch_pending_ = true;
    // The deadline holds while the subscription is being made, however long
    // that takes (a refused or unreachable subscription never confirms).
    return {Action::Kind::watch, deadline_, {}};
  }
  // A release published while this attempt was out may be older than the
  // busy answer or newer: try again rather than sleep through it.
  if (std::exchange(woken_in_flight_, false)) return attempt();
  milliseconds nap{0};
  switch (hint.kind) {
    case WaitHint::Kind::expiry: nap = std::max(hint.after, milliseconds(0)) + milliseconds(1); break;
    case WaitHint::Kind::event: nap = kNoExpiryPoll; break;
    case WaitHint::Kind::retry: nap = std::max(hint.after, milliseconds(0)); break;
  }
  if (blind_) {
    poll_ = poll_.count() == 0 ? kPollMin : std::min(poll_ * 2, kPollMax);
    if (nap.count() <= 0 || nap > poll_) nap = poll_;
  }
  waiting_ = true;
  return {Action::Kind::wait, std::min(deadline_, now + nap), {}};
}

AcquireFsm::Action AcquireFsm::on_error(time_point now, const Status& error) {
  attempting_ = false;
  if (error.code() == Errc::outcome_unknown) in_doubt_ = true;
  if (!transient(error.code())) return done(error);
  if (!first_error_) first_error_ = now;
  // In doubt, keep trying to settle it for the whole retry budget even when
  // the wait is shorter: the lock may be ours on the server.
  time_point give_up = *first_error_ + error_retry_;
  if (!in_doubt_) give_up = std::min(give_up, std::max(deadline_, *first_error_));
  if (now >= give_up) {
    return done(in_doubt_ ? Status(Errc::outcome_unknown,
                                   "acquire outcome unknown after retrying for " +
                                       std::to_string(error_retry_.count()) + " ms: " + error.message())
                          : error);
  }
  error_backoff_ = error_backoff_.count() == 0 ? kBackoffMin : std::min(error_backoff_ * 2, kBackoffMax);
  waiting_ = true;
  return {Action::Kind::wait, std::min(give_up, now + error_backoff_), {}};
}

AcquireFsm::Action AcquireFsm::on_watch_ready(time_point now, bool subscribed) {
  (void)now;
  if (!watch_pending_ || finished_) return {Action::Kind::none, {}, {}};
  watch_pending_ = false;
  blind_ = !subscribed;
  return attempt();
}

AcquireFsm::Action AcquireFsm::on_wake(time_point now) {
  if (finished_) return {Action::Kind::none, {}, {}};
  if (watch_pending_) {
    if (now < deadline_) return {Action::Kind::none, {}, {}};
    watch_pending_ = false;
    return done({Errc::timeout, "the lock was still held by another owner after waiting " +
                                    std::to_string(wait_.count()) + " ms"});
  }
  if (attempting_) {
    woken_in_flight_ = true;
    return {Action::Kind::none, {}, {}};
  }
  if (!waiting_) return {Action::Kind::none, {}, {}};
  if (now >= deadline_ && !first_error_)
    return done({Errc::timeout, "the lock was still held by another owner after waiting " +
                                    std::to_string(wait_.count()) + " ms"});
  return attempt();
}

}  // namespace dlock::detail

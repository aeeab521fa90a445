// A busy answer's advice on how long to wait before the next attempt.
#ifndef DLOCK_CORE_WAIT_HINT_HPP_
#define DLOCK_CORE_WAIT_HINT_HPP_

#include "dlock/options.hpp"

namespace dlock::detail {

// How long a busy answer says to wait before the next attempt (a wake-up
// from watch() may come sooner).
struct WaitHint {
  enum class Kind {
    expiry,   // the holder's lease ends `after` from now: try again then
    event,    // the holder has no expiry (a session, no TTL): wait for a wake-up
    retry,    // try again after `after` (a split vote, a vanished holder)
    watched,  // the backend watches exactly what this waiter waits for (a
              // queue's predecessor) and resyncs after a reconnect: no poll
    poll,     // releases may come unannounced (a peer library's, in a shared
              // layout): poll, backing off with jitter, never sleeping past
              // the holder's expiry `after` (negative: none known)
  };
  Kind kind = Kind::event;
  milliseconds after{0};

  static WaitHint expiry(milliseconds ttl) { return {Kind::expiry, ttl}; }
  static WaitHint event() { return {Kind::event, milliseconds(0)}; }
  static WaitHint retry(milliseconds delay) { return {Kind::retry, delay}; }
  static WaitHint watched() { return {Kind::watched, milliseconds(0)}; }
  static WaitHint poll(milliseconds holder_ttl) { return {Kind::poll, holder_ttl}; }
};

}  // namespace dlock::detail

#endif  // DLOCK_CORE_WAIT_HINT_HPP_

// When to renew which leases, and when a lease must be given up as lost, as
// an I/O-free state machine over an injected steady clock.
//
// One scheduler serves every lease of a client, so renewals batch: a new
// lease joins the next tick of its interval's phase (its first renewal may
// come early, never late), and at a tick every lease due within half an
// interval goes too. So all leases of one interval share one round trip.
//
// Validity: a grant or renewal sent at t makes the lease valid until
// t + lease - drift (drift = lease/100 + 2 ms, for clock-rate differences
// between this host and the server). Measured from the send time, never
// from the reply, so a slow reply cannot stretch it.
//
// Loss: a lease is lost when a renewal finds it gone or taken (the caller
// reports that directly), or when it cannot be confirmed in time: renewals
// keep failing (or the link is down) for one renew interval, or its validity
// runs out, whichever is first. A fixed lease (no renewal) is reported
// expired at its validity.
#ifndef DLOCK_CORE_RENEWAL_SCHEDULER_HPP_
#define DLOCK_CORE_RENEWAL_SCHEDULER_HPP_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/validity.hpp"
#include "dlock/options.hpp"

namespace dlock::detail {

class RenewalScheduler {
 public:
  using Clock = std::chrono::steady_clock;
  using time_point = Clock::time_point;
  using Id = std::uint64_t;

  // A lease granted by a request sent at `sent_at`. renew = false: fixed lease.
  void add(Id id, time_point sent_at, milliseconds lease, milliseconds interval, bool renew);
  void remove(Id id);
  bool contains(Id id) const { return entries_.count(id) != 0; }
  std::size_t size() const { return entries_.size(); }

  // Leases to renew now, marked in flight until renewed() or failed().
  std::vector<Id> take_due(time_point now);
  // The renewal sent at `sent_at` confirmed the lease.
  void renewed(Id id, time_point sent_at);
  // The renewal failed transiently (unreachable, unknown outcome).
  void failed(Id id, time_point now);
  // The connection dropped: retry every lease at once and start the clock on
  // the unreachable deadline.
  void link_down(time_point now);

  // Leases that can no longer be confirmed (removed from the scheduler).
  std::vector<std::pair<Id, LossReason>> take_lost(time_point now);

  // When the caller should next call take_lost/take_due; nullopt if idle.
  std::optional<time_point> next_wakeup() const;

  time_point valid_until(Id id) const;

 private:
  struct Entry {
    milliseconds lease{0};
    milliseconds interval{0};
    bool renew = true;
    bool in_flight = false;
    time_point valid_until{};
    time_point next_due{};
    std::optional<time_point> failing_since;
  };
  static time_point loss_deadline(const Entry& e);
  std::map<Id, Entry> entries_;
  std::map<milliseconds, time_point> phase_;  // next batch tick per interval
};

}  // namespace dlock::detail

#endif  // DLOCK_CORE_RENEWAL_SCHEDULER_HPP_

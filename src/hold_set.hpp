// The leases one recipe object holds (a SharedMutex's read holds or its write
// hold, a Semaphore's permits), with one loss signal for all of them: its
// token fires when any hold is lost, never when one is released. Not
// thread-safe: the owning object guards it with its mutex.
#ifndef DLOCK_HOLD_SET_HPP_
#define DLOCK_HOLD_SET_HPP_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <vector>

#include "dlock/lease.hpp"

namespace dlock::detail {

class HoldSet {
 public:
  HoldSet() = default;
  ~HoldSet();  // the relays go first, so the leases' releases are no losses
  HoldSet(const HoldSet&) = delete;
  HoldSet& operator=(const HoldSet&) = delete;

  // Adds a granted lease (newest last). A set that was empty starts a fresh
  // loss signal: a loss of earlier holds is not carried into new ones.
  void add(Lease lease);
  // A hold taken out of the set: its lease and the relay of its loss.
  struct Hold;
  using Taken = std::unique_ptr<Hold>;
  // Removes the oldest (front) or newest (back) hold. REQUIRES: !empty().
  Taken take_front();
  Taken take_back();
  std::vector<Taken> take_all();  // oldest first
  // The lease of a taken hold, its relay gone so that releasing it does not
  // fire the set's token. Call it without the owner's mutex: it waits for
  // a relay running on another thread, whose token's callbacks may call
  // into the owner.
  static Lease detach(Taken hold);

  bool empty() const { return holds_.empty(); }
  std::size_t size() const { return holds_.size(); }
  const Lease& newest() const;                // REQUIRES: !empty()
  std::vector<std::uint64_t> fences() const;  // oldest first
  // The earliest Lease::valid_until of the holds (max() when empty).
  std::chrono::steady_clock::time_point valid_until() const;
  // Fires when any hold added since the set was last empty is lost. A
  // default (never firing) token when empty.
  std::stop_token lost_token() const;

 private:
  std::vector<Taken> holds_;
  std::stop_source lost_;
};

struct HoldSet::Hold {
  Lease lease;
  std::optional<std::stop_callback<std::function<void()>>> relay;
};

}  // namespace dlock::detail

#endif  // DLOCK_HOLD_SET_HPP_

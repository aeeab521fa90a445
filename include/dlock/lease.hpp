// dlock/lease.hpp: one grant of a lock to one owner.
//
// A Lease is what Client::acquire returns: proof that its owner held the lock
// at grant time, the fencing token of that grant, and the means to learn that
// the lock was lost. It is move-only; destroying a Lease that still holds its
// level releases it (never throws; a failed release is reported to the
// client's logger and counted in ClientStats::release_failures). A Lease must
// not outlive its Client: the last Client handle releases every lease still
// held and fires their lost_token().
//
// Why fencing tokens: a lease can run out while its holder is paused (GC, swap,
// SIGSTOP) and another owner gets the lock; the old holder then writes with a
// stale view. Pass fence() along with every write to the protected resource and
// have the resource reject a fence lower than the highest it has seen. Fences
// are strictly increasing per lock name across holders; a re-entry keeps the
// fence of its grant. That holds for one master; Redlock's fences are weaker
// (see fence()).
//
// Thread safety: const methods may be called from any thread concurrently
// with the renewal watchdog. release() must not race with itself or with
// destruction of the same Lease.
#ifndef DLOCK_LEASE_HPP_
#define DLOCK_LEASE_HPP_

#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>

#include "dlock/error.hpp"
#include "dlock/export.hpp"

namespace dlock {

namespace detail {
struct Hold;
class ClientCore;
}  // namespace detail

class DLOCK_EXPORT Lease {
 public:
  // An empty lease: holds nothing; held() is false.
  Lease() noexcept;
  ~Lease();
  Lease(Lease&& other) noexcept;
  // Releases what *this held first, as the destructor does: waiting for the
  // server's answer (one round trip; in the background when called on the
  // client's I/O thread). Never throws: a failed release is logged and
  // counted in ClientStats::release_failures.
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  // True until release() returns (whatever its outcome: the level is given
  // up either way) or the lease is moved from. Stays true after the lock is
  // lost: check lost() as well.
  bool held() const noexcept;
  explicit operator bool() const noexcept { return held(); }

  // The lock name and the owner (REQUIRES: not empty).
  const std::string& name() const;
  const std::string& owner() const;

  // Fencing token of the grant this lease belongs to (REQUIRES: not empty).
  // With Redlock (redlock:// URLs) it is weaker: independent masters cannot
  // make a safe monotonic token, so the fence is the first master's ("node
  // 0's") counter, and 0 when node 0 was not part of the granting majority.
  // Such fences increase only while node 0 keeps its counter (persistence);
  // treat 0 as "no fence". Where fencing matters, use a single master with
  // persistence.
  std::uint64_t fence() const;

  // Re-entry depth of this owner on this lock right now (1 = plain hold).
  unsigned reentry_count() const;

  // The latest instant, on this process's steady clock, until which the lease
  // is known to be valid: send time of the last successful grant or renewal
  // plus the lease, minus a drift allowance. Work that must finish under the
  // lock should finish before it. Under the watchdog it moves forward.
  std::chrono::steady_clock::time_point valid_until() const;

  // True once the library learned the lock is lost (see LossReason).
  bool lost() const noexcept;

  // Fires the moment the lock is found lost (not when it is released). Use it
  // to abort work done under the lock, e.g. with std::stop_callback.
  std::stop_token lost_token() const noexcept;

  // Releases this level of the lock (one re-entry), waiting for the server's
  // answer. Errors: Errc::not_held when the lease is empty, already released
  // or the key expired; Errc::not_owner when another owner holds the key (our
  // lease ran out; nothing was touched); Errc::outcome_unknown when the reply
  // was lost (the release script is idempotent and is retried within the
  // command timeout first; if still unknown, the lease expires by itself).
  // After any return the lease no longer holds and renewal of this level stops.
  Status release();

 private:
  friend class detail::ClientCore;
  friend class Client;
  Lease(std::weak_ptr<detail::ClientCore> core, std::shared_ptr<detail::Hold> hold) noexcept;
  // Weak: a lease does not keep its client alive. When the last Client
  // handle goes, held leases are released and lost_token() fires.
  std::weak_ptr<detail::ClientCore> core_;
  std::shared_ptr<detail::Hold> hold_;
};

}  // namespace dlock

#endif  // DLOCK_LEASE_HPP_

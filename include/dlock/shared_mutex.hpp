// dlock/shared_mutex.hpp: a distributed read-write lock that meets the
// standard SharedTimedLockable requirements, so std::shared_lock and
// std::unique_lock work.
//
//   dlock::SharedMutex rw(client, "catalog");
//   { std::shared_lock rd(rw); read_catalog(); }              // readers overlap
//   { std::unique_lock wr(rw); write_catalog(rw.fence()); }   // a writer alone
//
// Order: everyone waits in one line kept on the server, in arrival order. A
// reader is let in at once only while no writer holds or waits; readers that
// arrive while a writer waits queue behind it, so a stream of readers cannot
// starve writers. A release hands the lock to the head of the line (several
// readers at once) inside the release.
//
// Fences: every grant, shared or exclusive, has one; a writer's is above
// every fence granted before it, so a resource that keeps the highest fence
// it has seen refuses the writes of a reader or writer whose lease ran out.
//
// Ownership: each lock_shared() is a hold of its own (threads sharing one
// SharedMutex each hold a read lock, as with std::shared_mutex); lock() is
// one hold of this object, not recursive. Asking for the other mode while
// this object holds the lock (read -> write upgrade, or the reverse) throws
// Error(precondition_failed) at once: waiting for it would wait for itself.
//
// Errors as for Mutex: lock*() throw Error for anything but contention,
// try_lock*() return false on contention, unlock*() never throw (a failed
// release is logged, counted and kept in last_release_status()).
// Backends: Redis (one master), ZooKeeper, PostgreSQL, SQLite. Redlock
// refuses it (Errc::invalid_argument, naming why).
#ifndef DLOCK_SHARED_MUTEX_HPP_
#define DLOCK_SHARED_MUTEX_HPP_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/export.hpp"
#include "dlock/lease.hpp"
#include "dlock/options.hpp"

namespace dlock {

namespace detail {
class HoldSet;
}

class DLOCK_EXPORT SharedMutex {
 public:
  // REQUIRES: name valid (see Client::acquire); checked on first use.
  SharedMutex(Client client, std::string name, LockOptions options = {});
  ~SharedMutex();  // releases what it still holds; never throws
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock();
  bool try_lock() { return acquire(false, milliseconds(0)); }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return acquire(false, to_wait(d));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return acquire(false, to_wait(t - Clock::now()));
  }
  void unlock() noexcept;

  void lock_shared();
  bool try_lock_shared() { return acquire(true, milliseconds(0)); }
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& d) {
    return acquire(true, to_wait(d));
  }
  template <class Clock, class Duration>
  bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& t) {
    return acquire(true, to_wait(t - Clock::now()));
  }
  void unlock_shared() noexcept;  // one read hold of this object (the newest)

  // Fence of the write hold, else of the newest read hold. REQUIRES: held
  // (else throws Error(not_held)).
  std::uint64_t fence() const;
  // Fires when a hold of this object is lost. A default token when none is held.
  std::stop_token lost_token() const;
  // Until when every hold of this object is known to be valid (the earliest
  // Lease::valid_until of them). REQUIRES: held (else throws Error(not_held)).
  std::chrono::steady_clock::time_point valid_until() const;
  unsigned readers() const;  // read holds of this object
  bool writing() const;
  unsigned held() const;  // holds of this object (its read holds, or 1 writing)
  Status last_release_status() const;
  const std::string& name() const { return name_; }

 private:
  bool acquire(bool shared, milliseconds wait);
  void drop(bool shared) noexcept;
  Client client_;
  const std::string name_;
  LockOptions options_;
  mutable std::mutex mu_;
  // Guarded by mu_: the write hold, or the read holds (oldest first).
  const std::unique_ptr<detail::HoldSet> holds_;
  bool writing_ = false;   // guarded by mu_: holds_ is the write hold
  int pending_write_ = 0;  // guarded by mu_: lock() calls under way
  int pending_read_ = 0;   // guarded by mu_
  Status last_release_;    // guarded by mu_
};

}  // namespace dlock

#endif  // DLOCK_SHARED_MUTEX_HPP_

// dlock/mutex.hpp: a distributed mutex that meets the standard TimedLockable
// requirements, so std::unique_lock, std::scoped_lock and std::lock_guard work.
//
//   dlock::Mutex m(client, "orders:42");
//   {
//     std::unique_lock lk(m);           // waits without polling
//     db.write(order, m.fence());       // fence of the current hold
//   }                                   // released here
//
// Owner model: a Mutex object is one owner (LockOptions::owner, random by
// default). Locking it again while it holds counts a re-entry, like
// std::recursive_timed_mutex, but ownership belongs to the object, not to the
// calling thread, so a lock taken on one thread or coroutine may be released
// on another. Two threads that must exclude each other need two Mutex objects
// (construction is cheap and does no I/O); threads sharing one Mutex share
// its ownership.
//
// Errors: lock() throws Error for anything but contention (server unreachable
// past options.error_retry, wrong key type, lease lost on re-entry...);
// try_lock*() return false on contention and throw on errors. unlock() never
// throws: a failed release is reported to the logger, counted, and returned by
// the last_release_status() call. release() is unlock() with the Status.
//
// Thread safety: all methods may be called concurrently.
#ifndef DLOCK_MUTEX_HPP_
#define DLOCK_MUTEX_HPP_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/export.hpp"
#include "dlock/lease.hpp"
#include "dlock/options.hpp"

namespace dlock {

class DLOCK_EXPORT Mutex {
 public:
  // REQUIRES: name valid (non-empty, at most 512 bytes, no NUL); checked on first use.
  Mutex(Client client, std::string name, LockOptions options = {});
  ~Mutex();  // releases every level still held; never throws
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock();  // waits as long as it takes; throws Error on anything but contention
  bool try_lock();
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return acquire_for(to_wait(d));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return acquire_for(to_wait(t - Clock::now()));
  }
  void unlock() noexcept;
  // unlock() that says how the release went.
  Status release();

  // True while this Mutex holds at least one level (held() > 0).
  bool owns() const;
  // Levels held through this Mutex (0: none), as Semaphore::held() counts
  // permits and SharedMutex::held() holds.
  unsigned held() const;
  [[deprecated("use held()")]] unsigned depth() const { return held(); }
  // Fence of the current hold. REQUIRES: owns(), else throws Error(not_held).
  std::uint64_t fence() const;
  // Steady-clock validity of the current hold. REQUIRES: owns().
  std::chrono::steady_clock::time_point valid_until() const;
  // Fires when the current hold is lost. A default token when not held.
  std::stop_token lost_token() const;
  // The status of the most recent unlock()/release().
  Status last_release_status() const;

  const std::string& name() const { return name_; }
  const std::string& owner() const { return options_.owner; }

 private:
  bool acquire_for(milliseconds wait);
  Client client_;
  const std::string name_;
  LockOptions options_;
  bool private_owner_ = false;  // the owner was made for this object
  std::mutex fresh_mu_;         // serialises fresh grants (see acquire_for)
  mutable std::mutex mu_;
  std::vector<Lease> levels_;  // guarded by mu_; back() is the newest level
  Status last_release_;        // guarded by mu_
};

// Runs fn while holding `name`, waiting up to `wait` for it. fn receives the
// Lease (for its fence and lost_token). Returns fn's result; throws Error if
// the lock could not be acquired (Errc::timeout after waiting), and whatever
// fn throws (the lock is released first). The lease is released by its
// destructor, so a failed release is logged and counted
// (ClientStats::release_failures), never swallowed.
template <class Fn>
auto with_lock(const Client& client, std::string_view name, milliseconds wait, Fn&& fn, const LockOptions& options = {})
    -> std::invoke_result_t<Fn&, const Lease&> {
  const Lease lease = client.acquire(name, wait, options).value();
  return std::forward<Fn>(fn)(lease);
}

}  // namespace dlock

#endif  // DLOCK_MUTEX_HPP_

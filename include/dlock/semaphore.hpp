// dlock/semaphore.hpp: a distributed counting semaphore: at most `permits`
// holders at once across every process and machine.
//
//   dlock::Semaphore sem(client, "render-slots", 4);
//   sem.acquire();           // one of 4 permits, waiting in line for it
//   render();
//   (void)sem.release();     // its Status says how the release went
//
// Like std::counting_semaphore, except that the count is set at run time
// and kept on the server: every client of a name must give the same
// `permits`, and one that disagrees gets Error(invalid_argument) naming both
// counts (a semaphore of 3 held or waited for cannot quietly become one of
// 5). The count is kept with each permit and place in line: once nobody
// holds or waits, the next client sets it (that is how it is changed).
//
// Every permit is a lease of its own, renewed by the client's watchdog (or
// kept by the session on ZooKeeper): a crashed holder's permit comes back
// when its lease runs out, whether or not anybody is acquiring, and a live
// holder's permit never disappears without lost_token() firing. Waiters
// queue in arrival order; a release hands the permit to the head of the
// line inside the release.
//
// Errors as for Mutex: acquire() throws Error for anything but contention;
// try_acquire*() return false on contention and throw on errors; release()
// never throws (a failed release is logged, counted and kept in
// last_release_status()).
// Backends: Redis (one master), ZooKeeper, PostgreSQL, SQLite. Redlock
// refuses it (Errc::invalid_argument, naming why).
#ifndef DLOCK_SEMAPHORE_HPP_
#define DLOCK_SEMAPHORE_HPP_

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

// The most permits a Semaphore may have, on every backend alike (PostgreSQL
// keeps the count in an int column).
inline constexpr unsigned kMaxPermits = 2'147'483'647;

class DLOCK_EXPORT Semaphore {
 public:
  // REQUIRES: 1 <= permits <= kMaxPermits and name valid; checked on first
  // use (Error(invalid_argument), before any I/O).
  Semaphore(Client client, std::string name, unsigned permits, LockOptions options = {});
  ~Semaphore();  // releases every permit it still holds; never throws
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;

  void acquire();
  bool try_acquire() { return take(milliseconds(0)); }
  template <class Rep, class Period>
  bool try_acquire_for(const std::chrono::duration<Rep, Period>& d) {
    return take(to_wait(d));
  }
  template <class Clock, class Duration>
  bool try_acquire_until(const std::chrono::time_point<Clock, Duration>& t) {
    return take(to_wait(t - Clock::now()));
  }
  // Gives back one permit this object holds (the oldest) and says how that
  // went (also kept in last_release_status()); never throws.
  Status release() noexcept;

  unsigned held() const;  // permits this object holds now
  unsigned max() const { return permits_; }
  // Fences of the permits held, oldest first (each grant has its own).
  std::vector<std::uint64_t> fences() const;
  // Fires when any permit of this object is lost. A default token when none is held.
  std::stop_token lost_token() const;
  // Until when every permit held is known to be valid (the earliest
  // Lease::valid_until of them). REQUIRES: held() > 0 (else throws
  // Error(not_held)).
  std::chrono::steady_clock::time_point valid_until() const;
  Status last_release_status() const;
  const std::string& name() const { return name_; }

 private:
  bool take(milliseconds wait);
  Client client_;
  const std::string name_;
  const unsigned permits_;
  LockOptions options_;
  mutable std::mutex mu_;
  const std::unique_ptr<detail::HoldSet> held_;  // guarded by mu_: the permits, oldest first
  Status last_release_;                          // guarded by mu_
};

}  // namespace dlock

#endif  // DLOCK_SEMAPHORE_HPP_

#include "dlock/shared_mutex.hpp"

#include <algorithm>

#include "recipe_calls.hpp"

namespace dlock {

SharedMutex::SharedMutex(Client client, std::string name, LockOptions options)
    : client_(std::move(client)), name_(std::move(name)), options_(std::move(options)) {
  options_.fair = true;  // writers wait in the same line as readers
}

SharedMutex::~SharedMutex() {
  Lease writer;
  std::vector<Lease> readers;
  {
    std::lock_guard lk(mu_);
    writer = std::move(writer_);
    readers.swap(readers_);
  }
  // Each releases itself as it goes (never throws).
}

void SharedMutex::lock() {
  if (!acquire(false, kForever)) throw Error(Errc::timeout, "lock() returned without the lock");
}

void SharedMutex::lock_shared() {
  if (!acquire(true, kForever)) throw Error(Errc::timeout, "lock_shared() returned without the lock");
}

bool SharedMutex::acquire(bool shared, milliseconds wait) {
  {
    std::lock_guard lk(mu_);
    // This object's own hold in the other mode (or its write hold again)
    // would be waited for by itself.
    if (writer_.held() || pending_write_ > 0 || (!shared && (!readers_.empty() || pending_read_ > 0)))
      throw Error(Errc::precondition_failed,
                  std::string("SharedMutex '") + name_ + "': " +
                      (shared ? "lock_shared() while this object holds or is taking the write lock"
                       : writer_.held() || pending_write_ > 0
                           ? "lock() while this object holds or is taking the write lock (not recursive)"
                           : "lock() while this object holds read locks (an upgrade would wait for "
                             "itself: unlock_shared() first)") +
                      "; it would wait for itself");
    ++(shared ? pending_read_ : pending_write_);
  }
  auto r = detail::take_hold(*client_.core_, name_, wait, options_,
                             {shared ? detail::LockMode::shared : detail::LockMode::exclusive, 0});
  std::lock_guard lk(mu_);
  --(shared ? pending_read_ : pending_write_);
  if (!detail::granted_or_throw(r)) return false;
  if (shared)
    readers_.push_back(std::move(r.value()));
  else
    writer_ = std::move(r.value());
  return true;
}

void SharedMutex::drop(bool shared) noexcept {
  Lease hold;
  {
    std::lock_guard lk(mu_);
    if (shared ? readers_.empty() : !writer_.held()) {
      last_release_ = Status(Errc::not_held, std::string(shared ? "unlock_shared()" : "unlock()") + " of '" + name_ +
                                                 "', which this SharedMutex does not hold so");
      return;
    }
    if (shared) {
      hold = std::move(readers_.back());
      readers_.pop_back();
    } else {
      hold = std::move(writer_);
    }
  }
  Status s = hold.release();
  std::lock_guard lk(mu_);
  last_release_ = std::move(s);
}

void SharedMutex::unlock() noexcept { drop(false); }
void SharedMutex::unlock_shared() noexcept { drop(true); }

std::uint64_t SharedMutex::fence() const {
  std::lock_guard lk(mu_);
  if (writer_.held()) return writer_.fence();
  if (!readers_.empty()) return readers_.back().fence();
  throw Error(Errc::not_held, "SharedMutex::fence(): not held");
}

std::stop_token SharedMutex::lost_token() const {
  std::lock_guard lk(mu_);
  if (writer_.held()) return writer_.lost_token();
  if (!readers_.empty()) return readers_.back().lost_token();
  return {};
}

std::chrono::steady_clock::time_point SharedMutex::valid_until() const {
  std::lock_guard lk(mu_);
  if (!writer_.held() && readers_.empty()) throw Error(Errc::not_held, "SharedMutex::valid_until(): not held");
  auto until = std::chrono::steady_clock::time_point::max();
  if (writer_.held()) until = writer_.valid_until();
  for (const Lease& r : readers_) until = std::min(until, r.valid_until());
  return until;
}

unsigned SharedMutex::readers() const {
  std::lock_guard lk(mu_);
  return static_cast<unsigned>(readers_.size());
}

bool SharedMutex::writing() const {
  std::lock_guard lk(mu_);
  return writer_.held();
}

Status SharedMutex::last_release_status() const {
  std::lock_guard lk(mu_);
  return last_release_;
}

}  // namespace dlock

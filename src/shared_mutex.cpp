#include "dlock/shared_mutex.hpp"

#include "hold_set.hpp"
#include "recipe_calls.hpp"

namespace dlock {

SharedMutex::SharedMutex(Client client, std::string name, LockOptions options)
    : client_(std::move(client)),
      name_(std::move(name)),
      options_(std::move(options)),
      holds_(std::make_unique<detail::HoldSet>()) {
  options_.fair = true;  // writers wait in the same line as readers
}

SharedMutex::~SharedMutex() {
  std::vector<detail::HoldSet::Taken> held;
  {
    std::lock_guard lk(mu_);
    held = holds_->take_all();
  }
  // Each lease releases itself as it goes (never throws).
  for (auto& h : held) detail::HoldSet::detach(std::move(h));
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
    const bool writing = writing_ && !holds_->empty();
    const bool reading = !writing_ && !holds_->empty();
    if (writing || pending_write_ > 0 || (!shared && (reading || pending_read_ > 0)))
      throw Error(Errc::precondition_failed,
                  std::string("SharedMutex '") + name_ + "': " +
                      (shared ? "lock_shared() while this object holds or is taking the write lock"
                       : writing || pending_write_ > 0
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
  writing_ = !shared;
  holds_->add(std::move(r.value()));
  return true;
}

void SharedMutex::drop(bool shared) noexcept {
  detail::HoldSet::Taken hold;
  {
    std::lock_guard lk(mu_);
    if (holds_->empty() || shared == writing_) {
      last_release_ = Status(Errc::not_held, std::string(shared ? "unlock_shared()" : "unlock()") + " of '" + name_ +
                                                 "', which this SharedMutex does not hold so");
      return;
    }
    hold = holds_->take_back();  // the write hold, or the newest read hold
  }
  Status s = detail::HoldSet::detach(std::move(hold)).release();
  std::lock_guard lk(mu_);
  last_release_ = std::move(s);
}

void SharedMutex::unlock() noexcept { drop(false); }
void SharedMutex::unlock_shared() noexcept { drop(true); }

std::uint64_t SharedMutex::fence() const {
  std::lock_guard lk(mu_);
  if (!holds_->empty()) return holds_->newest().fence();
  throw Error(Errc::not_held, "SharedMutex::fence(): not held");
}

std::stop_token SharedMutex::lost_token() const {
  std::lock_guard lk(mu_);
  return holds_->lost_token();
}

std::chrono::steady_clock::time_point SharedMutex::valid_until() const {
  std::lock_guard lk(mu_);
  if (holds_->empty()) throw Error(Errc::not_held, "SharedMutex::valid_until(): not held");
  return holds_->valid_until();
}

unsigned SharedMutex::readers() const {
  std::lock_guard lk(mu_);
  return writing_ ? 0 : static_cast<unsigned>(holds_->size());
}

unsigned SharedMutex::held() const {
  std::lock_guard lk(mu_);
  return static_cast<unsigned>(holds_->size());
}

bool SharedMutex::writing() const {
  std::lock_guard lk(mu_);
  return writing_ && !holds_->empty();
}

Status SharedMutex::last_release_status() const {
  std::lock_guard lk(mu_);
  return last_release_;
}

}  // namespace dlock

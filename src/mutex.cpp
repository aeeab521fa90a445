#include "dlock/mutex.hpp"

#include "client_core.hpp"

namespace dlock {

Mutex::Mutex(Client client, std::string name, LockOptions options)
    : client_(std::move(client)), name_(std::move(name)), options_(std::move(options)) {
  private_owner_ = options_.owner.empty();
  if (private_owner_) options_.owner = Client::random_owner();
}

Mutex::~Mutex() {
  std::vector<Lease> levels;
  {
    std::lock_guard lk(mu_);
    levels.swap(levels_);
  }
  while (!levels.empty()) levels.pop_back();  // newest first; each releases itself
}

void Mutex::lock() {
  if (!acquire_for(kForever)) throw Error(Errc::timeout, "lock() returned without the lock");
}

bool Mutex::try_lock() { return acquire_for(milliseconds(0)); }

bool Mutex::acquire_for(milliseconds wait) {
  wait = std::max(wait, milliseconds(0));
  if (client_.core_->on_io_thread())
    throw Error(Errc::precondition_failed, "Mutex: blocking call on the client's I/O thread");
  detail::AcquireSeed seed;
  if (private_owner_) {
    // The owner is this object's alone: with no level held, a lock is a
    // fresh grant and may take the fast path (one round trip on this
    // thread). One at a time, so that threads sharing this Mutex still
    // share its ownership: the next one finds the level and re-enters.
    std::lock_guard fresh(fresh_mu_);
    bool empty;
    {
      std::lock_guard lk(mu_);
      empty = levels_.empty();
    }
    if (empty) {
      if (auto fast = client_.core_->acquire_now(name_, wait, options_, seed)) {
        if (fast->ok()) {
          std::lock_guard lk(mu_);
          levels_.push_back(std::move(fast->value()));
          return true;
        }
        if (fast->code() == Errc::busy || fast->code() == Errc::timeout) return false;
        throw Error(fast->status());
      }
    }
  }
  auto r = detail::acquire_and_wait(*client_.core_, name_, wait, options_, seed);
  if (r.ok()) {
    std::lock_guard lk(mu_);
    levels_.push_back(std::move(r.value()));
    return true;
  }
  if (r.code() == Errc::busy || r.code() == Errc::timeout) return false;
  throw Error(r.status());
}

Status Mutex::release() {
  Lease level;
  {
    std::lock_guard lk(mu_);
    if (levels_.empty()) {
      last_release_ = Status(Errc::not_held, "unlock of '" + name_ + "', which this Mutex does not hold");
      return last_release_;
    }
    level = std::move(levels_.back());
    levels_.pop_back();
  }
  Status s = level.release();
  std::lock_guard lk(mu_);
  last_release_ = s;
  return s;
}

void Mutex::unlock() noexcept {
  try {
    Status s = release();
    if (!s.ok()) {
      client_.core_->count_release_failure();
      client_.core_->log(LogLevel::warning, "unlock of '" + name_ + "' failed: " + s.to_string());
    }
  } catch (...) {  // never throws: std::unique_lock calls this from destructors
    client_.core_->count_release_failure();
  }
}

bool Mutex::owns() const {
  std::lock_guard lk(mu_);
  return !levels_.empty();
}

unsigned Mutex::held() const {
  std::lock_guard lk(mu_);
  return static_cast<unsigned>(levels_.size());
}

std::uint64_t Mutex::fence() const {
  std::lock_guard lk(mu_);
  if (levels_.empty()) throw Error(Errc::not_held, "fence() of '" + name_ + "', which this Mutex does not hold");
  return levels_.back().fence();
}

std::chrono::steady_clock::time_point Mutex::valid_until() const {
  std::lock_guard lk(mu_);
  if (levels_.empty()) throw Error(Errc::not_held, "valid_until() of '" + name_ + "', which this Mutex does not hold");
  return levels_.back().valid_until();
}

std::stop_token Mutex::lost_token() const {
  std::lock_guard lk(mu_);
  return levels_.empty() ? std::stop_token() : levels_.back().lost_token();
}

Status Mutex::last_release_status() const {
  std::lock_guard lk(mu_);
  return last_release_;
}

}  // namespace dlock

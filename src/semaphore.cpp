#include "dlock/semaphore.hpp"

#include "hold_set.hpp"
#include "recipe_calls.hpp"

namespace dlock {

Semaphore::Semaphore(Client client, std::string name, unsigned permits, LockOptions options)
    : client_(std::move(client)),
      name_(std::move(name)),
      permits_(permits),
      options_(std::move(options)),
      held_(std::make_unique<detail::HoldSet>()) {}

Semaphore::~Semaphore() {
  std::vector<detail::HoldSet::Taken> held;
  {
    std::lock_guard lk(mu_);
    held = held_->take_all();
  }
  // Each lease releases itself as it goes (never throws).
  for (auto& h : held) detail::HoldSet::detach(std::move(h));
}

void Semaphore::acquire() {
  if (!take(kForever)) throw Error(Errc::timeout, "acquire() returned without a permit");
}

bool Semaphore::take(milliseconds wait) {
  if (permits_ == 0 || permits_ > kMaxPermits)
    throw Error(Errc::invalid_argument, "Semaphore '" + name_ + "': permits must be from 1 to " +
                                            std::to_string(kMaxPermits) + ", not " + std::to_string(permits_));
  auto r = detail::take_hold(*client_.core_, name_, wait, options_, {detail::LockMode::shared, permits_});
  if (!detail::granted_or_throw(r)) return false;
  std::lock_guard lk(mu_);
  held_->add(std::move(r.value()));
  return true;
}

Status Semaphore::release() noexcept {
  detail::HoldSet::Taken permit;
  {
    std::lock_guard lk(mu_);
    if (held_->empty()) {
      last_release_ = Status(Errc::not_held, "release() of '" + name_ + "': this Semaphore holds no permit");
      return last_release_;
    }
    permit = held_->take_front();
  }
  Status s = detail::HoldSet::detach(std::move(permit)).release();
  std::lock_guard lk(mu_);
  last_release_ = s;
  return s;
}

unsigned Semaphore::held() const {
  std::lock_guard lk(mu_);
  return static_cast<unsigned>(held_->size());
}

std::vector<std::uint64_t> Semaphore::fences() const {
  std::lock_guard lk(mu_);
  return held_->fences();
}

std::chrono::steady_clock::time_point Semaphore::valid_until() const {
  std::lock_guard lk(mu_);
  if (held_->empty()) throw Error(Errc::not_held, "Semaphore::valid_until(): no permit held");
  return held_->valid_until();
}

std::stop_token Semaphore::lost_token() const {
  std::lock_guard lk(mu_);
  return held_->lost_token();
}

Status Semaphore::last_release_status() const {
  std::lock_guard lk(mu_);
  return last_release_;
}

}  // namespace dlock

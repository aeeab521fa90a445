#include "dlock/semaphore.hpp"

#include <algorithm>
#include <optional>

#include "recipe_calls.hpp"

namespace dlock {

// One permit: its lease, and the forwarding of its loss to the semaphore's token.
struct Semaphore::Permit {
  Lease lease;
  std::optional<std::stop_callback<std::function<void()>>> on_lost;
};

Semaphore::Semaphore(Client client, std::string name, unsigned permits, LockOptions options)
    : client_(std::move(client)), name_(std::move(name)), permits_(permits), options_(std::move(options)) {}

Semaphore::~Semaphore() {
  std::vector<std::unique_ptr<Permit>> held;
  {
    std::lock_guard lk(mu_);
    held.swap(held_);
  }
  for (auto& p : held) p->on_lost.reset();  // before the lease: its release must not count as a loss
}

void Semaphore::acquire() {
  if (!take(kForever)) throw Error(Errc::timeout, "acquire() returned without a permit");
}

bool Semaphore::take(milliseconds wait) {
  if (permits_ == 0) throw Error(Errc::invalid_argument, "Semaphore '" + name_ + "': permits must be >= 1");
  auto r = detail::take_hold(*client_.core_, name_, wait, options_, {detail::LockMode::shared, permits_});
  if (!detail::granted_or_throw(r)) return false;
  auto permit = std::make_unique<Permit>();
  permit->lease = std::move(r.value());
  std::lock_guard lk(mu_);
  if (held_.empty()) lost_ = std::stop_source();
  permit->on_lost.emplace(permit->lease.lost_token(), [source = lost_]() mutable { source.request_stop(); });
  held_.push_back(std::move(permit));
  return true;
}

void Semaphore::release() noexcept {
  std::unique_ptr<Permit> permit;
  {
    std::lock_guard lk(mu_);
    if (held_.empty()) {
      last_release_ = Status(Errc::not_held, "release() of '" + name_ + "': this Semaphore holds no permit");
      return;
    }
    permit = std::move(held_.front());
    held_.erase(held_.begin());
  }
  permit->on_lost.reset();
  Status s = permit->lease.release();
  std::lock_guard lk(mu_);
  last_release_ = std::move(s);
}

unsigned Semaphore::held() const {
  std::lock_guard lk(mu_);
  return static_cast<unsigned>(held_.size());
}

std::vector<std::uint64_t> Semaphore::fences() const {
  std::lock_guard lk(mu_);
  std::vector<std::uint64_t> out;
  for (const auto& p : held_) out.push_back(p->lease.fence());
  return out;
}

std::chrono::steady_clock::time_point Semaphore::valid_until() const {
  std::lock_guard lk(mu_);
  if (held_.empty()) throw Error(Errc::not_held, "Semaphore::valid_until(): no permit held");
  auto until = std::chrono::steady_clock::time_point::max();
  for (const auto& p : held_) until = std::min(until, p->lease.valid_until());
  return until;
}

std::stop_token Semaphore::lost_token() const {
  std::lock_guard lk(mu_);
  return held_.empty() ? std::stop_token() : lost_.get_token();
}

Status Semaphore::last_release_status() const {
  std::lock_guard lk(mu_);
  return last_release_;
}

}  // namespace dlock

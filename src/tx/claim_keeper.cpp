#include "tx/claim_keeper.hpp"

#include <algorithm>

#include "core/validity.hpp"

namespace dlock::tx::detail {

ClaimKeeper::Claim::Claim(std::string gid, std::uint64_t fence, Clock::time_point sent_at, milliseconds lease)
    : gid_(std::move(gid)),
      fence_(fence),
      lease_(lease),
      renewed_at_(sent_at),
      valid_until_(dlock::detail::valid_until(sent_at, lease).time_since_epoch().count()) {}

bool ClaimKeeper::Claim::lost() const {
  if (lost_.load()) return true;
  if (Clock::now().time_since_epoch().count() < valid_until_.load()) return false;
  lost_ = true;  // a renewal landing later does not bring it back
  return true;
}

void ClaimKeeper::Claim::renewed(Clock::time_point sent_at) {
  renewed_at_ = sent_at;
  valid_until_ = dlock::detail::valid_until(sent_at, lease_).time_since_epoch().count();
}

ClaimKeeper::Kept::~Kept() {
  if (claim_) keeper_->forget(claim_.get());
}

ClaimKeeper::~ClaimKeeper() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();  // a renewal under way is bounded by lease / 6
  if (thread_.joinable()) thread_.join();
}

ClaimKeeper::Kept ClaimKeeper::keep(std::string gid, std::uint64_t fence, Clock::time_point sent_at) {
  auto claim = std::make_shared<Claim>(std::move(gid), fence, sent_at, lease_);
  std::lock_guard lock(mu_);
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  claims_.push_back(claim);
  return Kept(this, std::move(claim));
}

void ClaimKeeper::forget(const Claim* claim) {
  std::lock_guard lock(mu_);
  std::erase_if(claims_, [claim](const std::shared_ptr<Claim>& c) { return c.get() == claim; });
}

void ClaimKeeper::run() {
  std::unique_lock lock(mu_);
  // Looked at twice per third of a lease: a claim is renewed between a
  // third and a half of its lease after the last renewal.
  const auto tick = std::max(lease_ / 6, milliseconds(1));
  while (!stopping_) {
    wake_.wait_for(lock, tick, [this] { return stopping_.load(); });
    if (!stopping_) renew_due(lock);
  }
}

void ClaimKeeper::renew_due(std::unique_lock<std::mutex>& lock) {
  const auto now = Clock::now();
  std::vector<std::shared_ptr<Claim>> due;
  for (const auto& c : claims_)
    if (!c->lost_.load() && now - c->renewed_at_ >= lease_ / 3) due.push_back(c);
  if (due.empty()) return;
  lock.unlock();  // the writes go out without the lock: keep() and forget() do not wait for them
  for (const auto& c : due) {
    if (stopping_.load()) break;
    const auto sent = Clock::now();
    // Each renewal is bounded, so that one stuck write cannot hold back the
    // others past their lapse.
    auto kept = log_.renew(c->gid(), c->fence(), lease_, sent + lease_ / 6);
    if (kept.ok() && *kept)
      c->renewed(sent);
    else if (kept.ok())
      c->lost_ = true;  // lapsed or taken over: the driver stops at its next step
    // An error leaves it to lapse unless a later renewal lands in time.
  }
  lock.lock();
}

}  // namespace dlock::tx::detail

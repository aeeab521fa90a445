#include "hold_set.hpp"

#include <algorithm>

namespace dlock::detail {

HoldSet::~HoldSet() {
  for (auto& h : holds_) h->relay.reset();
}

void HoldSet::add(Lease lease) {
  if (holds_.empty()) lost_ = std::stop_source();
  auto hold = std::make_unique<Hold>();
  hold->lease = std::move(lease);
  // Fires at once if this lease is already lost.
  hold->relay.emplace(hold->lease.lost_token(), [source = lost_]() mutable { source.request_stop(); });
  holds_.push_back(std::move(hold));
}

Lease HoldSet::detach(Taken hold) {
  hold->relay.reset();
  return std::move(hold->lease);
}

HoldSet::Taken HoldSet::take_front() {
  Taken hold = std::move(holds_.front());
  holds_.erase(holds_.begin());
  return hold;
}

HoldSet::Taken HoldSet::take_back() {
  Taken hold = std::move(holds_.back());
  holds_.pop_back();
  return hold;
}

std::vector<HoldSet::Taken> HoldSet::take_all() {
  std::vector<Taken> out;
  out.swap(holds_);
  return out;
}

const Lease& HoldSet::newest() const { return holds_.back()->lease; }

std::vector<std::uint64_t> HoldSet::fences() const {
  std::vector<std::uint64_t> out;
  for (const auto& h : holds_) out.push_back(h->lease.fence());
  return out;
}

std::chrono::steady_clock::time_point HoldSet::valid_until() const {
  auto until = std::chrono::steady_clock::time_point::max();
  for (const auto& h : holds_) until = std::min(until, h->lease.valid_until());
  return until;
}

std::stop_token HoldSet::lost_token() const { return holds_.empty() ? std::stop_token() : lost_.get_token(); }

}  // namespace dlock::detail

#include "dlock/lease.hpp"

#include "client_core.hpp"
#include "sync_wait.hpp"

namespace dlock {

Lease::Lease() noexcept = default;

Lease::Lease(std::weak_ptr<detail::ClientCore> core, std::shared_ptr<detail::Hold> hold) noexcept
    : core_(std::move(core)), hold_(std::move(hold)) {}

Lease::Lease(Lease&& other) noexcept = default;

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Lease old(std::move(*this));  // released by its destructor
    core_ = std::move(other.core_);
    hold_ = std::move(other.hold_);
  }
  return *this;
}

Lease::~Lease() {
  if (!hold_) return;
  auto core = core_.lock();
  if (!core) return;  // the client's shutdown released it
  if (core->on_io_thread()) {
    // Cannot block here: release in the background, report failures.
    core->release(std::move(hold_), [weak = core_](Status s) {
      if (s.ok()) return;
      if (auto c = weak.lock()) {
        c->count_release_failure();
        c->log(LogLevel::warning, "release from a Lease destructor failed: " + s.to_string());
      }
    });
    return;
  }
  try {
    Status s = release();
    if (!s.ok()) {
      core->count_release_failure();
      core->log(LogLevel::warning, "release from a Lease destructor failed: " + s.to_string());
    }
  } catch (...) {  // destructors never throw
    core->count_release_failure();
  }
}

bool Lease::held() const noexcept { return hold_ != nullptr; }

const std::string& Lease::name() const {
  if (!hold_) throw Error(Errc::not_held, "empty lease");
  return hold_->name;
}

const std::string& Lease::owner() const {
  if (!hold_) throw Error(Errc::not_held, "empty lease");
  return hold_->owner;
}

std::uint64_t Lease::fence() const {
  if (!hold_) throw Error(Errc::not_held, "empty lease");
  return hold_->fence.load();
}

unsigned Lease::reentry_count() const {
  if (!hold_) throw Error(Errc::not_held, "empty lease");
  return hold_->depth.load();
}

std::chrono::steady_clock::time_point Lease::valid_until() const {
  if (!hold_) throw Error(Errc::not_held, "empty lease");
  return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(hold_->valid_until_ns.load()));
}

bool Lease::lost() const noexcept { return hold_ && hold_->lost.load(); }

std::stop_token Lease::lost_token() const noexcept {
  return hold_ ? hold_->lost_source.get_token() : std::stop_token();
}

Status Lease::release() {
  if (!hold_) return {Errc::not_held, "the lease is empty (already released or moved from)"};
  auto core = core_.lock();
  if (!core) {
    hold_.reset();
    return {Errc::cancelled, "the lease's client was closed, which released it"};
  }
  if (core->on_io_thread())
    return {Errc::precondition_failed,
            "Lease::release blocks, and was called on the client's I/O thread; use Client::async_release"};
  if (auto s = core->release_now(hold_)) {
    hold_.reset();
    return *s;
  }
  detail::SyncWait<Status> result;
  core->release(std::move(hold_), result.setter());
  return result.wait();
}

}  // namespace dlock

#include "etcd/lease_keeper.hpp"

#include <algorithm>

namespace dlock::etcd {
namespace {

constexpr std::chrono::milliseconds kRetryPause{50};
constexpr std::chrono::milliseconds kMinPatience{500};
constexpr std::chrono::milliseconds kMaxPatience{2000};

}  // namespace

LeaseKeeper::LeaseKeeper(EtcdRpc& rpc, Handlers handlers) : rpc_(rpc), handlers_(std::move(handlers)) {
  thread_ = std::thread([this] { run(); });
}

LeaseKeeper::~LeaseKeeper() { stop(); }

void LeaseKeeper::keep(std::int64_t lease, std::chrono::seconds ttl) {
  std::lock_guard lock(mu_);
  lease_ = lease;
  ttl_ = ttl;
  if (stream_) stream_->cancel();
  cv_.notify_all();
}

void LeaseKeeper::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (stream_) stream_->cancel();
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void LeaseKeeper::run() {
  bool again = false;  // the last keep-alive failed: try soon
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const std::int64_t lease = lease_;
    if (lease == 0) {
      cv_.wait(lock, [&] { return stopping_ || lease_ != 0; });
      continue;
    }
    // A third of the TTL after the lease was given (or last kept), so two
    // more keep-alives fit before it could lapse. After a failure, a short
    // pause: a member that is gone is not asked in a busy loop.
    const auto third = std::chrono::duration_cast<std::chrono::milliseconds>(ttl_) / 3;
    const auto wait = again ? kRetryPause : third;
    if (cv_.wait_for(lock, wait, [&] { return stopping_ || lease_ != lease; })) {
      again = false;
      continue;
    }
    // Given up well before the next is due, so that two or three more can
    // be tried (on other members) before the lease could lapse.
    const auto patience = std::clamp<std::chrono::milliseconds>(third / 2, kMinPatience, kMaxPatience);
    const auto sent_at = Clock::now();
    auto stream = rpc_.keep_alive(sent_at + patience);
    stream_ = stream.get();
    lock.unlock();
    auto ttl = stream->refresh(lease);
    if (ttl.ok())
      handlers_.kept(lease, sent_at, *ttl);
    else
      handlers_.broken(lease, ttl.status());
    again = !ttl.ok();
    {
      std::lock_guard relock(mu_);
      stream_ = nullptr;
    }
    stream.reset();  // outside the lock: it waits for the stream's end
    lock.lock();
  }
}

}  // namespace dlock::etcd

#include "tx/socket_cutter.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

namespace dlock::tx::detail {

SocketCutter::~SocketCutter() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::uint64_t SocketCutter::arm(int fd, Clock::time_point at) {
  std::uint64_t ticket;
  const int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  {
    std::lock_guard lock(mu_);
    ticket = next_++;
    armed_.emplace(ticket, Armed{own, at});
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  changed_.notify_all();
  return ticket;
}

bool SocketCutter::disarm(std::uint64_t ticket) {
  std::lock_guard lock(mu_);
  auto it = armed_.find(ticket);
  if (it == armed_.end()) return false;
  const bool cut = it->second.cut;
  if (it->second.fd >= 0) ::close(it->second.fd);
  armed_.erase(it);
  return cut;
}

// Few calls are armed at once (one per 2PC Try in flight): a scan for the
// soonest is cheaper than keeping a second index.
void SocketCutter::loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    auto soonest = Clock::time_point::max();
    const auto now = Clock::now();
    for (auto& [ticket, a] : armed_) {
      if (a.cut) continue;
      if (a.at <= now) {
        if (a.fd >= 0) ::shutdown(a.fd, SHUT_RDWR);
        a.cut = true;
      } else {
        soonest = std::min(soonest, a.at);
      }
    }
    if (soonest == Clock::time_point::max())
      changed_.wait(lock);
    else
      changed_.wait_until(lock, soonest);
  }
}

}  // namespace dlock::tx::detail

#include "support/tcp_fault.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace dlock::test {
namespace {

using tools::connect_nowait;

sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  return a;
}

}  // namespace

TcpFault::TcpFault(int upstream) : upstream_(upstream) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = loopback(0);
  socklen_t len = sizeof a;
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener_, 16) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("TcpFault: cannot listen");
  port_ = ntohs(a.sin_port);
  threads_.emplace_back([this] { accept_loop(); });
}

TcpFault::~TcpFault() {
  stop_ = true;
  ::shutdown(listener_, SHUT_RDWR);
  {
    std::lock_guard lk(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : threads_) t.join();
  for (int fd : fds_) ::close(fd);
  ::close(listener_);
}

void TcpFault::stall() {
  stalled_ = true;
  // The accept loop looks at the flag every 20 ms: past that, it takes no
  // more connections.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  {
    std::lock_guard lk(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
  }
  // From here on the kernel drops every SYN to the port.
  syn_drop_.begin(listener_);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

void TcpFault::drop_connections() {
  std::lock_guard lk(mu_);
  for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
}

bool TcpFault::connects_within(std::chrono::milliseconds limit) const {
  const int fd = connect_nowait(port_);
  if (fd < 0) return false;
  pollfd p{fd, POLLOUT, 0};
  int err = 0;
  socklen_t len = sizeof err;
  const bool ok = ::poll(&p, 1, static_cast<int>(limit.count())) == 1 &&
                  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
  ::close(fd);
  return ok;
}

void TcpFault::accept_loop() {
  while (!stop_) {
    if (stalled_) {  // its queue stays full
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    pollfd p{listener_, POLLIN, 0};
    const int n = ::poll(&p, 1, 20);
    if (stop_) return;
    if (n <= 0 || stalled_) continue;
    const int c = ::accept(listener_, nullptr, nullptr);
    if (c < 0) return;
    if (upstream_ == 0) {
      ::close(c);
      continue;
    }
    const int u = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = loopback(upstream_);
    if (::connect(u, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(c);
      ::close(u);
      continue;
    }
    std::lock_guard lk(mu_);
    fds_.push_back(c);
    fds_.push_back(u);
    threads_.emplace_back([this, c, u] { pump(c, u, false); });
    threads_.emplace_back([this, c, u] { pump(u, c, true); });
  }
}

void TcpFault::pump(int from, int to, bool split) {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(from, buf, sizeof buf, 0);
    if (n <= 0) break;
    ssize_t first = split && n > 1 && delay_ms > 0 ? 1 : n;
    if (::send(to, buf, static_cast<std::size_t>(first), MSG_NOSIGNAL) != first) break;
    if (first < n) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
      if (::send(to, buf + first, static_cast<std::size_t>(n - first), MSG_NOSIGNAL) != n - first) break;
    }
  }
  ::shutdown(to, SHUT_WR);
}

}  // namespace dlock::test

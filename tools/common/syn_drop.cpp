#include "common/syn_drop.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace dlock::tools {

int connect_nowait(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void SynDrop::begin(int listener) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
  // A backlog of 0 still queues one connection (and one more in the SYN
  // stage): two fill it.
  ::listen(listener, 0);
  for (int i = 0; i < 2; ++i)
    if (const int fd = connect_nowait(ntohs(a.sin_port)); fd >= 0) fillers_.push_back(fd);
}

void SynDrop::end(int listener, int backlog) {
  ::listen(listener, backlog);
  close();
}

void SynDrop::close() {
  for (int fd : fillers_) ::close(fd);
  fillers_.clear();
}

}  // namespace dlock::tools

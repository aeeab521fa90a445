#include "redis/sync_connection.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "redis/errors.hpp"

namespace dlock::redis {
namespace {

Status unavailable(const std::string& peer, const std::string& what) {
  return {Errc::unavailable, "connection to " + peer + ": " + what};
}

void set_timeouts(int fd, milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// Non-blocking connect bounded by `timeout`; returns a blocking socket or -1.
int connect_fd(const detail::RedisEndpoint& ep, milliseconds timeout, std::string& why) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(ep.port);
  if (int rc = ::getaddrinfo(ep.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    why = "cannot resolve '" + ep.host + "': " + ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
      int err = 0;
      socklen_t len = sizeof err;
      if (rc == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
        rc = 0;
      else {
        why = rc == 0 ? "connecting timed out after " + std::to_string(timeout.count()) + " ms"
                      : std::string("cannot connect: ") + std::strerror(err != 0 ? err : errno);
        rc = -1;
      }
    } else if (rc != 0) {
      why = std::string("cannot connect: ") + std::strerror(errno);
    }
    if (rc != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) return -1;
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  return fd;
}

}  // namespace

SyncConnection::SyncConnection(int fd, std::string peer, milliseconds command_timeout, milliseconds socket_timeout)
    : fd_(fd),
      peer_(std::move(peer)),
      command_timeout_(command_timeout),
      socket_timeout_(socket_timeout),
      buf_(16 * 1024) {}

SyncConnection::~SyncConnection() { close_fd(); }

void SyncConnection::close_fd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<std::unique_ptr<SyncConnection>> SyncConnection::open(const detail::RedisEndpoint& ep,
                                                             milliseconds connect_timeout,
                                                             milliseconds command_timeout) {
  std::string why;
  const int fd = connect_fd(ep, connect_timeout, why);
  if (fd < 0) return unavailable(ep.describe(), why);
  set_timeouts(fd, connect_timeout);
  std::unique_ptr<SyncConnection> c(new SyncConnection(fd, ep.describe(), command_timeout, connect_timeout));
  std::string hs;
  std::size_t n = 0;
  if (!ep.password.empty()) {
    if (ep.username.empty())
      append_command(hs, {"AUTH", ep.password});
    else
      append_command(hs, {"AUTH", ep.username, ep.password});
    ++n;
  }
  if (ep.db != 0) {
    const std::string db = std::to_string(ep.db);
    append_command(hs, {"SELECT", db});
    ++n;
  }
  append_command(hs, {"PING"});
  ++n;
  std::vector<Reply> replies;
  if (Status s = c->call(hs, n, replies); !s.ok()) {
    // AUTH/SELECT/PING change nothing: a lost reply leaves nothing in doubt.
    return Status(Errc::unavailable, s.message());
  }
  for (const Reply& r : replies)
    if (r.is_error()) return translate_error(r.str);
  c->set_command_timeout(command_timeout);
  return c;
}

void SyncConnection::set_command_timeout(milliseconds t) {
  command_timeout_ = t;
  socket_timeout_ = t;
  if (fd_ >= 0) set_timeouts(fd_, t);
}

bool SyncConnection::closed_while_idle(milliseconds idle) const {
  if (fd_ < 0) return true;
  if (Clock::now() - last_used_ < idle) return false;
  // Between commands nothing is due from the server: readable means its
  // end of the connection is closed (or it sent something unasked for).
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) != 0;
}

Status SyncConnection::call(const std::string& payload, std::size_t n, std::vector<Reply>& out, Clock::time_point by) {
  out.clear();
  if (Status s = send(payload); !s.ok()) return s;
  return receive(n, out, by);
}

bool SyncConnection::sent_script(const std::string& sha1) const {
  return std::find(scripts_.begin(), scripts_.end(), sha1) != scripts_.end();
}

void SyncConnection::note_script(const std::string& sha1) {
  if (!sent_script(sha1)) scripts_.push_back(sha1);
}

Status SyncConnection::send(const std::string& payload) {
  if (fd_ < 0) return unavailable(peer_, "closed");
  last_used_ = sent_at_ = Clock::now();
  std::size_t off = 0;
  while (off < payload.size()) {
    const ssize_t w = ::send(fd_, payload.data() + off, payload.size() - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int e = errno;
      close_fd();
      if (off == 0) return unavailable(peer_, std::string("write failed: ") + std::strerror(e));
      return {Errc::outcome_unknown, "connection to " + peer_ + " failed while sending: " + std::strerror(e)};
    }
    off += static_cast<std::size_t>(w);
  }
  ++sent_;
  return {};
}

Status SyncConnection::receive(std::size_t n, std::vector<Reply>& out, Clock::time_point by, bool readable) {
  out.clear();
  if (fd_ < 0) return {Errc::outcome_unknown, "connection to " + peer_ + " closed after the command was sent"};
  // A call whose deadline is no sooner than its command timeout (a
  // release, the handshake, a try) is bounded by that timeout, which the
  // socket's receive timeout keeps when it is no longer: its first wait
  // right after the send (while that timeout still ends with the
  // command's) needs no poll, one system call less per call (system calls
  // are what a round trip costs a client). The kernel's timer may fire that
  // timeout a little late (its timer wheel's step); a sooner deadline is
  // kept exactly, by poll.
  // (The caller counted its deadline from just before the send: a
  // millisecond's slack.)
  const bool plain_recv = readable || (by >= sent_at_ + command_timeout_ - std::chrono::milliseconds(1) &&
                                       socket_timeout_ <= command_timeout_ + std::chrono::milliseconds(1) &&
                                       Clock::now() - sent_at_ < std::chrono::milliseconds(1));
  return receive_until(n, out, std::min(sent_at_ + command_timeout_, by), plain_recv);
}

Status SyncConnection::receive_until(std::size_t n, std::vector<Reply>& out, Clock::time_point deadline,
                                     bool plain_recv) {
  while (out.size() < n) {
    Status error;
    if (auto reply = reader_.next(error)) {
      out.push_back(std::move(*reply));
      continue;
    }
    if (!error.ok()) {
      close_fd();
      return error;
    }
    // The socket's receive timeout is the command timeout: a sooner
    // deadline is kept by polling first. A deadline already past still
    // takes a reply that is there (a zero-wait poll).
    const auto now = Clock::now();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    pollfd p{fd_, POLLIN, 0};
    if (plain_recv) {
      plain_recv = false;  // later waits (a reply in pieces) poll
    } else {
      const int ready = ::poll(&p, 1, static_cast<int>(std::clamp<long long>(left, 0, 1 << 30)));
      if (ready < 0 && errno == EINTR) continue;  // a signal: wait again for what is left
      if (ready == 0) {
        close_fd();
        return {Errc::outcome_unknown, "no reply from " + peer_ + " within the call's deadline"};
      }
    }
    const ssize_t r = ::recv(fd_, buf_.data(), buf_.size(), 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && Clock::now() < deadline) continue;
    if (r <= 0) {
      const int e = errno;
      close_fd();
      return {Errc::outcome_unknown,
              r == 0 ? "connection to " + peer_ + " closed after the command was sent"
              : (e == EAGAIN || e == EWOULDBLOCK)
                  ? "no reply from " + peer_ + " within " + std::to_string(command_timeout_.count()) + " ms"
                  : "connection to " + peer_ + " failed: " + std::strerror(e)};
    }
    reader_.feed(buf_.data(), static_cast<std::size_t>(r));
  }
  return {};
}

}  // namespace dlock::redis

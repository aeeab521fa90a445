#include "redis/sync_connection.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "redis/errors.hpp"
#include "redis/handshake.hpp"
#include "redis/tls.hpp"

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
  if (ssl_ != nullptr) SSL_free(ssl_);  // no close_notify: the socket closes at once
  ssl_ = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool SyncConnection::pending() const { return ssl_ != nullptr && SSL_pending(ssl_) > 0; }

// Non-blocking, so `deadline` bounds the whole handshake, however many
// round trips it takes.
Status SyncConnection::tls_handshake(ssl_ctx_st* ctx, const std::string& host, Clock::time_point deadline) {
  Status setup;
  ssl_ = new_client_session(ctx, fd_, host, &nowait_, setup);
  if (ssl_ == nullptr) return setup;
  const int flags = ::fcntl(fd_, F_GETFL);
  ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
  const std::string failed = "TLS handshake with " + peer_ + " ";
  for (;;) {
    ERR_clear_error();
    const int rc = SSL_connect(ssl_);
    if (rc == 1) break;
    const int err = SSL_get_error(ssl_, rc);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
      // A cut (a restart, maxclients, a reset link) is the server's
      // unavailability, retried; anything else is the TLS set-up's fault.
      const bool cut = handshake_cut_short(ssl_, err);
      const std::string why = handshake_failure(ssl_, session_error(ssl_, rc));
      if (cut) return {Errc::unavailable, failed + "was cut short: " + why};
      return {Errc::tls_failed, failed + "failed: " + why};
    }
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd_, static_cast<short>(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
    const int ready = left > 0 ? ::poll(&p, 1, static_cast<int>(left)) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0)
      // A server that answered TLS at connect and is silent now (paused,
      // overloaded) more likely than a port that is not TLS (a plain-text
      // server reads the ClientHello as an unfinished command and waits):
      // unavailable, as a connect that timed out; the hint says both.
      return {Errc::unavailable, failed + "did not complete in time (a silent server, or a port that is not TLS)"};
  }
  ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
  return {};
}

long SyncConnection::write_some(const char* data, std::size_t n) {
  if (ssl_ == nullptr) return ::send(fd_, data, n, MSG_NOSIGNAL);
  ERR_clear_error();
  errno = 0;
  const int w = SSL_write(ssl_, data, static_cast<int>(std::min<std::size_t>(n, 1 << 30)));
  if (w > 0) return w;
  tls_error_ = session_error(ssl_, w);
  if (errno == 0) errno = SSL_get_error(ssl_, w) == SSL_ERROR_WANT_WRITE ? EAGAIN : EPIPE;
  return -1;
}

long SyncConnection::read_some(char* data, std::size_t n, bool wait) {
  if (ssl_ == nullptr) return ::recv(fd_, data, n, 0);
  nowait_ = !wait;
  ERR_clear_error();
  errno = 0;
  const int r = SSL_read(ssl_, data, static_cast<int>(std::min<std::size_t>(n, 1 << 30)));
  if (r > 0) return r;
  const int err = SSL_get_error(ssl_, r);
  if (err == SSL_ERROR_ZERO_RETURN || (err == SSL_ERROR_SYSCALL && errno == 0 && ERR_peek_error() == 0)) return 0;
  tls_error_ = session_error(ssl_, r);
  if (errno == 0) errno = err == SSL_ERROR_WANT_READ ? EAGAIN : EPROTO;
  return -1;
}

Result<std::unique_ptr<SyncConnection>> SyncConnection::open(const detail::RedisEndpoint& ep,
                                                             milliseconds connect_timeout, milliseconds command_timeout,
                                                             ssl_ctx_st* tls) {
  if (ep.tls && tls == nullptr) return Status(Errc::tls_failed, "no TLS context for " + ep.describe());
  // The connect, the TLS handshake and the AUTH/PING after it, within the
  // command timeout too (a call's patience: a host that drops the SYN, or a
  // silent server, must not hold it up past its deadline).
  const auto patience = std::min(connect_timeout, command_timeout);
  const auto deadline = Clock::now() + patience;
  std::string why;
  const int fd = connect_fd(ep, patience, why);
  if (fd < 0) return unavailable(ep.describe(), why);
  set_timeouts(fd, connect_timeout);
  std::unique_ptr<SyncConnection> c(new SyncConnection(fd, ep.describe(), command_timeout, connect_timeout));
  if (ep.tls)
    if (Status s = c->tls_handshake(tls, ep.host, deadline); !s.ok()) return s;
  std::string hs;
  const std::size_t n = append_handshake(hs, ep);
  std::vector<Reply> replies;
  if (Status s = c->call(hs, n, replies, deadline); !s.ok()) {
    // AUTH/SELECT/PING change nothing: a lost reply leaves nothing in doubt.
    return Status(Errc::unavailable, s.message());
  }
  if (Status s = handshake_verdict(replies, ep); !s.ok()) return s;
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

Status SyncConnection::send(const std::string& payload, milliseconds extra) {
  if (fd_ < 0) return unavailable(peer_, "closed");
  last_used_ = sent_at_ = Clock::now();
  extra_ = extra;
  // TLS: whether any byte of a record reached the socket (a record cut
  // short leaves the request in doubt).
  const auto wire_before = ssl_ != nullptr ? BIO_number_written(SSL_get_wbio(ssl_)) : 0;
  std::size_t off = 0;
  while (off < payload.size()) {
    const long w = write_some(payload.data() + off, payload.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const std::string e = ssl_ != nullptr ? tls_error_ : std::strerror(errno);
      const bool none = off == 0 && (ssl_ == nullptr || BIO_number_written(SSL_get_wbio(ssl_)) == wire_before);
      close_fd();
      if (none) return unavailable(peer_, "write failed: " + e);
      return {Errc::outcome_unknown, "connection to " + peer_ + " failed while sending: " + e};
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
  // A command the server may hold (WAIT) polls: its allowance is longer.
  const auto budget = command_timeout_ + extra_;
  // Whether the socket's own timeout is this call's bound: then a read may
  // block on it.
  const bool bounded = extra_.count() == 0 && by >= sent_at_ + command_timeout_ - std::chrono::milliseconds(1) &&
                       socket_timeout_ <= command_timeout_ + std::chrono::milliseconds(1) &&
                       Clock::now() - sent_at_ < std::chrono::milliseconds(1);
  return receive_until(n, out, std::min(sent_at_ + budget, by), readable || bounded, bounded);
}

Status SyncConnection::receive_until(std::size_t n, std::vector<Reply>& out, Clock::time_point deadline,
                                     bool plain_recv, bool bounded) {
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
    if (plain_recv || pending()) {
      plain_recv = false;  // later waits (a reply in pieces) poll
    } else {
      const int ready = ::poll(&p, 1, static_cast<int>(std::clamp<long long>(left, 0, 1 << 30)));
      if (ready < 0 && errno == EINTR) continue;  // a signal: wait again for what is left
      if (ready == 0) {
        close_fd();
        return {Errc::outcome_unknown, "no reply from " + peer_ + " within the call's deadline"};
      }
    }
    // Plain TCP: a recv after poll's yes returns at once. TLS: SSL_read
    // wants a whole record, which a readable socket may hold only part of:
    // it waits only on the first read of a call the socket's timeout bounds.
    const long r = read_some(buf_.data(), buf_.size(), bounded);
    bounded = false;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && Clock::now() < deadline) continue;
    if (r <= 0) {
      const int e = errno;
      const bool tls = ssl_ != nullptr;
      close_fd();
      return {Errc::outcome_unknown,
              r == 0 ? "connection to " + peer_ + " closed after the command was sent"
              : (e == EAGAIN || e == EWOULDBLOCK)
                  ? "no reply from " + peer_ + " within " + std::to_string((command_timeout_ + extra_).count()) + " ms"
                  : "connection to " + peer_ + " failed: " + (tls ? tls_error_ : std::strerror(e))};
    }
    reader_.feed(buf_.data(), static_cast<std::size_t>(r));
  }
  return {};
}

}  // namespace dlock::redis

// A blocking Redis connection used on the calling thread, for the fast path
// of blocking calls: one write and one read per command, as a minimal
// hiredis loop does, with no hand-off to the client's I/O thread.
//
// TCP or TLS (OpenSSL over the same blocking socket, verified as the I/O
// thread's connections are: redis/tls.hpp). The socket is close-on-exec.
// Timeouts come from SO_RCVTIMEO/SO_SNDTIMEO plus a deadline checked
// between reads.
//
// Failure semantics, as Connection's: nothing written = unavailable; written
// without a whole reply = outcome_unknown. After any failure the connection
// is broken() and must be discarded.
//
// Thread safety: none; one thread at a time (the pool hands it out).
#ifndef DLOCK_REDIS_SYNC_CONNECTION_HPP_
#define DLOCK_REDIS_SYNC_CONNECTION_HPP_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/options.hpp"
#include "redis/resp.hpp"
#include "redis/url.hpp"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX
struct ssl_st;      // OpenSSL's SSL

namespace dlock::redis {

class SyncConnection {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects (with a TLS handshake when endpoint.tls, in `tls`, which
  // must then be given and outlive the connection) and runs
  // AUTH/SELECT/PING. Errors as Connection's handshake.
  static Result<std::unique_ptr<SyncConnection>> open(const detail::RedisEndpoint& endpoint,
                                                      milliseconds connect_timeout, milliseconds command_timeout,
                                                      ssl_ctx_st* tls = nullptr);
  ~SyncConnection();
  SyncConnection(const SyncConnection&) = delete;
  SyncConnection& operator=(const SyncConnection&) = delete;

  // Sends `payload` (formatted commands) and reads `n` replies into `out`,
  // giving up at `by` or after the command timeout, whichever comes first
  // (outcome_unknown, the connection closed: a late reply cannot be taken
  // for the next command's).
  Status call(const std::string& payload, std::size_t n, std::vector<Reply>& out,
              std::chrono::steady_clock::time_point by = std::chrono::steady_clock::time_point::max());
  // The same in two halves, for a caller that writes to several servers
  // before it reads any answer (Redlock): send() as call()'s write;
  // receive() reads `n` replies by `by` or the command timeout from the
  // send (a reply already there is taken even when `by` has passed);
  // `readable`: the caller's poll saw the socket readable, so the first
  // read needs no poll of its own.
  // `extra`: how much longer than the command timeout the server may take
  // to answer (a WAIT blocks that long).
  Status send(const std::string& payload, milliseconds extra = milliseconds(0));
  Status receive(std::size_t n, std::vector<Reply>& out, Clock::time_point by, bool readable = false);
  bool broken() const { return fd_ < 0; }
  // To poll several at once; -1 when broken. A TLS connection may hold a
  // reply already read from it (pending()): no poll then.
  int fd() const { return fd_; }
  bool pending() const;
  // Whether the connection has been idle for `idle` and its server has
  // closed it meanwhile (a restart, a kill, an idle timeout): a command sent
  // there would be in doubt for nothing. One poll, without waiting.
  bool closed_while_idle(milliseconds idle) const;
  // For the commands from now on (the socket's receive timeout too).
  void set_command_timeout(milliseconds t);
  std::uint64_t requests_sent() const { return sent_; }
  // Whether a script (by its SHA1) was sent whole on this connection: then
  // the server has it cached, and EVALSHA will do (unless it was flushed).
  bool sent_script(const std::string& sha1) const;
  void note_script(const std::string& sha1);

 private:
  SyncConnection(int fd, std::string peer, milliseconds command_timeout, milliseconds socket_timeout);
  void close_fd();
  Status tls_handshake(ssl_ctx_st* ctx, const std::string& host, Clock::time_point deadline);
  // One send()/recv(), or SSL_write()/SSL_read(): bytes moved, 0 at the
  // peer's end, -1 with errno set (EAGAIN: the socket's timeout).
  long write_some(const char* data, std::size_t n);
  // `wait`: TLS only, whether SSL_read may wait on the blocking socket for
  // the rest of a record (else EAGAIN: poll, then read again).
  long read_some(char* data, std::size_t n, bool wait);
  // plain_recv: the first wait is a recv() (bounded by the socket's
  // timeout, or readable already), not a poll. bounded: the socket's
  // timeout is the call's bound, so a TLS read may wait on it.
  Status receive_until(std::size_t n, std::vector<Reply>& out, Clock::time_point deadline, bool plain_recv,
                       bool bounded);
  int fd_;
  ssl_st* ssl_ = nullptr;  // TLS only
  bool nowait_ = false;    // its reads' MSG_DONTWAIT (redis/tls.hpp)
  std::string tls_error_;  // why the last TLS read or write failed
  std::string peer_;       // for messages: redis://host:port
  milliseconds command_timeout_;
  milliseconds socket_timeout_;  // the socket's SO_RCVTIMEO/SO_SNDTIMEO
  ReplyReader reader_;
  std::vector<char> buf_;
  std::uint64_t sent_ = 0;
  std::vector<std::string> scripts_;  // sent whole here (a handful)
  Clock::time_point last_used_ = Clock::now();
  Clock::time_point sent_at_ = Clock::now();  // the last send's start
  milliseconds extra_{0};                     // the last send's allowance
};

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_SYNC_CONNECTION_HPP_

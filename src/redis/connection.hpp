// One Redis connection over Boost.Asio: TCP or TLS, AUTH/SELECT on every
// (re)connect, automatic pipelining, per-request deadlines, reconnect with
// jittered backoff.
//
// Pipelining: requests queued while a write is in progress go out together in
// the next write, so N concurrent callers cost about one syscall and one round
// trip, not N.
//
// Failure semantics (what the caller's handler receives):
//   - never written, deadline passed (server down, reconnecting): unavailable.
//     Nothing reached the server; retrying is safe.
//   - written, then the connection broke or the deadline passed: outcome_unknown.
//   - error replies are not failures here: they are Replies of type error,
//     translated by the caller (redis/errors.hpp).
//
// Threading: every method must be called on the io_context's thread (the
// owner posts there); handlers run there too.
#ifndef DLOCK_REDIS_CONNECTION_HPP_
#define DLOCK_REDIS_CONNECTION_HPP_

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/options.hpp"
#include "redis/resp.hpp"
#include "redis/url.hpp"

namespace dlock::redis {

struct ConnectionConfig {
  detail::RedisEndpoint endpoint;  // credentials already merged with ClientOptions
  milliseconds connect_timeout{2000};
  milliseconds command_timeout{2000};
  milliseconds backoff_min{50};
  milliseconds backoff_max{2000};
  bool pubsub = false;       // after the handshake every reply is a push
  std::string name = "cmd";  // for log lines
  Logger log;                // never empty
};

using ReplyHandler = std::function<void(Status, std::vector<Reply>&&)>;

class Connection {
 public:
  using Clock = std::chrono::steady_clock;

  Connection(boost::asio::io_context& io, ConnectionConfig config);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts connecting. `first` runs once, with the outcome of the first
  // attempt (ok when the handshake succeeded). Later attempts happen on their
  // own after a failure, until close().
  void start(std::function<void(Status)> first);

  // Queues `payload` (one or more formatted commands) expecting `replies`
  // replies. `handler` runs exactly once. timeout 0 = config.command_timeout.
  // In pubsub mode pass replies = 0: the handler runs once the bytes are
  // written (subscription confirmations arrive as pushes).
  void exec(std::string payload, std::size_t replies, ReplyHandler handler, milliseconds timeout = milliseconds(0));

  // pubsub mode: receives every reply after the handshake.
  void on_push(std::function<void(Reply&&)> handler) { push_handler_ = std::move(handler); }
  // Called with true after each successful handshake, false when the
  // connection drops.
  void on_state(std::function<void(bool up)> handler) { state_handler_ = std::move(handler); }

  // Fails every request not yet written with `why` (written ones: as a
  // dropped connection) and stops reconnecting. Idempotent.
  void close(Status why = Status(Errc::cancelled, "client closed"));

  bool ready() const { return state_ == State::ready; }
  std::uint64_t requests_sent() const { return requests_sent_; }
  std::uint64_t reconnects() const { return reconnects_; }

 private:
  enum class State { idle, connecting, handshaking, ready, backoff, closed };
  struct Request {
    std::string payload;
    std::size_t expected = 0;
    std::vector<Reply> replies;
    ReplyHandler handler;  // empty once answered (a late reply is then dropped)
    Clock::time_point deadline;
    Clock::time_point written_at;
  };
  using tcp = boost::asio::ip::tcp;

  void connect_attempt();
  void on_connected();
  void send_handshake();
  void attempt_failed(Status status);
  void connection_lost(Status status);
  void schedule_reconnect();
  void tear_down();
  void write_pending();
  void start_write();
  void read_loop();
  void on_bytes(std::size_t n);
  void dispatch(Reply&& reply);
  void arm_deadline_timer();
  void on_deadline();
  void finish(Request& r, Status status);
  Status tls_setup();

  template <class F>
  void with_stream(F&& f) {
    if (tls_)
      f(*tls_);
    else
      f(*socket_);
  }

  boost::asio::io_context& io_;
  ConnectionConfig config_;
  State state_ = State::idle;
  std::uint64_t generation_ = 0;  // bumped on every teardown: stale callbacks check it
  std::function<void(Status)> first_;
  std::function<void(Reply&&)> push_handler_;
  std::function<void(bool)> state_handler_;

  tcp::resolver resolver_;
  std::unique_ptr<boost::asio::ssl::context> ssl_ctx_;
  std::unique_ptr<tcp::socket> socket_;
  std::unique_ptr<boost::asio::ssl::stream<tcp::socket>> tls_;
  boost::asio::steady_timer connect_timer_;
  boost::asio::steady_timer reconnect_timer_;
  boost::asio::steady_timer deadline_timer_;
  Clock::time_point deadline_armed_for_ = Clock::time_point::max();

  std::deque<Request> pending_;   // not yet written
  std::deque<Request> inflight_;  // written, awaiting replies in order
  bool handshake_inflight_ = false;
  bool tls_handshaking_ = false;
  bool writing_ = false;
  std::string write_buf_;
  std::vector<char> read_buf_;
  ReplyReader reader_;
  Clock::time_point last_read_;
  milliseconds backoff_{0};
  std::uint64_t requests_sent_ = 0;
  std::uint64_t reconnects_ = 0;
  bool ever_ready_ = false;
};

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_CONNECTION_HPP_

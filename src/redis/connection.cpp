#include "redis/connection.hpp"

#include <fcntl.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>

#include "core/token.hpp"
#include "redis/errors.hpp"
#include "redis/handshake.hpp"
#include "redis/tls.hpp"

namespace dlock::redis {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using boost::system::error_code;

namespace {
constexpr std::size_t kReadChunk = 16 * 1024;

std::string describe(const error_code& ec) { return ec.message(); }
}  // namespace

Connection::Connection(asio::io_context& io, ConnectionConfig config)
    : io_(io),
      config_(std::move(config)),
      resolver_(io),
      connect_timer_(io),
      reconnect_timer_(io),
      deadline_timer_(io),
      read_buf_(kReadChunk) {}

Connection::~Connection() = default;

void Connection::start(std::function<void(Status)> first) {
  first_ = std::move(first);
  if (config_.endpoint.tls) {
    if (Status s = tls_setup(); !s.ok()) {
      state_ = State::closed;
      auto f = std::move(first_);
      if (f) f(s);
      return;
    }
  }
  connect_attempt();
}

Status Connection::tls_setup() {
  try {
    ssl_ctx_ = std::make_unique<ssl::context>(ssl::context::tls_client);
  } catch (const std::exception& e) {
    return {Errc::tls_failed, std::string("TLS setup failed: ") + e.what()};
  }
  return configure_client_tls(ssl_ctx_->native_handle(), config_.endpoint);
}

void Connection::connect_attempt() {
  state_ = State::connecting;
  const std::uint64_t gen = ++generation_;
  Connection* self = this;  // lives until the loop drains (backend.hpp)
  connect_timer_.expires_after(config_.connect_timeout);
  connect_timer_.async_wait([this, self, gen](const error_code& ec) {
    if (ec || gen != generation_ || state_ == State::ready || state_ == State::closed) return;
    if (tls_handshaking_) {
      // A plain-text server reads the ClientHello as an unfinished command
      // and waits: say what is likely wrong rather than just "timed out".
      attempt_failed(
          {Errc::tls_failed, "TLS handshake with " + config_.endpoint.describe() + " did not complete within " +
                                 std::to_string(config_.connect_timeout.count()) + " ms (is the server's port TLS?)"});
      return;
    }
    attempt_failed({Errc::unavailable, "connecting to " + config_.endpoint.describe() + " timed out after " +
                                           std::to_string(config_.connect_timeout.count()) + " ms"});
  });
  socket_ = std::make_unique<tcp::socket>(io_);
  tls_.reset();
  resolver_.async_resolve(
      config_.endpoint.host, std::to_string(config_.endpoint.port),
      [this, self, gen](const error_code& ec, tcp::resolver::results_type results) {
        if (gen != generation_ || state_ == State::closed) return;
        if (ec) {
          attempt_failed({Errc::unavailable, "cannot resolve '" + config_.endpoint.host + "': " + describe(ec)});
          return;
        }
        asio::async_connect(*socket_, results, [this, self, gen](const error_code& ec2, const tcp::endpoint&) {
          if (gen != generation_ || state_ == State::closed) return;
          if (ec2) {
            attempt_failed(
                {Errc::unavailable, "cannot connect to " + config_.endpoint.describe() + ": " + describe(ec2)});
            return;
          }
          on_connected();
        });
      });
}

void Connection::on_connected() {
  error_code ignored;
  // A child the application forks and execs must not inherit the lock
  // server's connection (Asio opens sockets without SOCK_CLOEXEC).
  const int fd = socket_->native_handle();
  ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
  socket_->set_option(tcp::no_delay(true), ignored);
  socket_->set_option(asio::socket_base::keep_alive(true), ignored);
  if (!config_.endpoint.tls) {
    send_handshake();
    return;
  }
  const std::uint64_t gen = generation_;
  Connection* self = this;  // lives until the loop drains (backend.hpp)
  tls_ = std::make_unique<ssl::stream<tcp::socket>>(std::move(*socket_), *ssl_ctx_);
  socket_.reset();
  if (Status s = expect_peer(tls_->native_handle(), config_.endpoint.host); !s.ok()) {
    attempt_failed(std::move(s));
    return;
  }
  tls_handshaking_ = true;
  tls_->async_handshake(ssl::stream_base::client, [this, self, gen](const error_code& ec) {
    if (gen != generation_ || state_ == State::closed) return;
    tls_handshaking_ = false;
    if (ec) {
      // Cut short by the transport (a restart, maxclients, a reset link):
      // the server's unavailability, retried; else the TLS set-up's fault.
      const bool transport = ec == asio::error::eof || ec == asio::error::connection_reset ||
                             ec == asio::error::broken_pipe || ec == ssl::error::stream_truncated;
      const std::string why = handshake_failure(tls_->native_handle(), describe(ec));
      if (handshake_cut_short(tls_->native_handle(), 0, transport)) {
        attempt_failed(
            {Errc::unavailable, "TLS handshake with " + config_.endpoint.describe() + " was cut short: " + why});
        return;
      }
      attempt_failed({Errc::tls_failed, "TLS handshake with " + config_.endpoint.describe() + " failed: " + why});
      return;
    }
    send_handshake();
  });
}

// AUTH, SELECT and a PING, pipelined (redis/handshake.hpp).
void Connection::send_handshake() {
  state_ = State::handshaking;
  Request hs;
  hs.expected = append_handshake(hs.payload, config_.endpoint);
  hs.deadline = Clock::now() + config_.connect_timeout;
  hs.handler = [this](Status s, std::vector<Reply>&& replies) {
    if (s.ok()) s = handshake_verdict(replies, config_.endpoint);
    if (!s.ok()) {
      attempt_failed(std::move(s));
      return;
    }
    connect_timer_.cancel();
    state_ = State::ready;
    backoff_ = milliseconds(0);
    if (ever_ready_) ++reconnects_;
    ever_ready_ = true;
    if (first_) std::exchange(first_, nullptr)(Status());
    if (state_handler_) state_handler_(true);
    write_pending();
  };
  handshake_inflight_ = true;
  last_read_ = Clock::now();
  write_buf_ = hs.payload;
  hs.written_at = Clock::now();
  inflight_.push_front(std::move(hs));
  read_loop();
  start_write();
  arm_deadline_timer();
}

void Connection::attempt_failed(Status status) {
  if (state_ == State::closed) return;
  const bool fatal = status.code() == Errc::auth_failed || status.code() == Errc::tls_failed ||
                     status.code() == Errc::invalid_argument || status.code() == Errc::permission_denied;
  tear_down();
  if (first_) {
    // The first attempt decides what connect() reports; the owner closes us on failure.
    std::exchange(first_, nullptr)(status);
    if (state_ == State::closed) return;
  }
  // Requests waiting for this server learn at once when retrying cannot help.
  if (fatal) {
    auto pending = std::move(pending_);
    pending_.clear();
    for (Request& r : pending) finish(r, status);
  }
  config_.log(LogLevel::warning,
              config_.name + " connection to " + config_.endpoint.describe() + " failed: " + status.to_string());
  schedule_reconnect();
}

void Connection::connection_lost(Status status) {
  if (state_ == State::closed) return;
  const bool was_ready = state_ == State::ready;
  if (!was_ready) {
    if (state_ == State::handshaking)
      status = Status(Errc::unavailable,
                      "connection to " + config_.endpoint.describe() +
                          " closed during the handshake (wrong protocol, or a TLS port?): " + status.message());
    attempt_failed(std::move(status));
    return;
  }
  tear_down();
  config_.log(LogLevel::warning,
              config_.name + " connection to " + config_.endpoint.describe() + " lost: " + status.message());
  if (state_handler_) state_handler_(false);
  schedule_reconnect();
}

// Closes the transport; in-flight requests become outcome_unknown, pending
// ones stay queued for the next connection (until their deadline).
void Connection::tear_down() {
  ++generation_;
  tls_handshaking_ = false;
  error_code ignored;
  connect_timer_.cancel();
  resolver_.cancel();
  if (tls_) tls_->lowest_layer().close(ignored);
  if (socket_) socket_->close(ignored);
  writing_ = false;
  write_buf_.clear();
  reader_.reset();
  auto inflight = std::move(inflight_);
  inflight_.clear();
  // The handshake's own handler is not told: whoever tears down reports why
  // (a connect timeout, a closed connection), once.
  if (handshake_inflight_ && !inflight.empty()) inflight.front().handler = nullptr;
  handshake_inflight_ = false;
  for (Request& r : inflight) {
    if (!r.handler) continue;
    if (r.expected == 0)
      finish(r, {});  // pubsub writes need no reply
    else
      finish(r, {Errc::outcome_unknown,
                 "connection to " + config_.endpoint.describe() + " lost after the command was sent"});
  }
  if (state_ != State::closed) state_ = State::idle;
}

void Connection::schedule_reconnect() {
  if (state_ == State::closed) return;
  state_ = State::backoff;
  backoff_ = backoff_.count() == 0 ? config_.backoff_min : std::min(backoff_ * 2, config_.backoff_max);
  // Full jitter over the upper half: processes that lost one server together
  // do not come back together.
  const auto half = std::max<std::int64_t>(1, backoff_.count() / 2);
  const auto delay =
      milliseconds(half + static_cast<std::int64_t>(detail::random_u64() % static_cast<std::uint64_t>(half)));
  Connection* self = this;  // lives until the loop drains (backend.hpp)
  const std::uint64_t gen = generation_;
  reconnect_timer_.expires_after(delay);
  reconnect_timer_.async_wait([this, self, gen](const error_code& ec) {
    if (ec || gen != generation_ || state_ != State::backoff) return;
    connect_attempt();
  });
}

void Connection::close(Status why) {
  if (state_ == State::closed) return;
  tear_down();
  state_ = State::closed;
  reconnect_timer_.cancel();
  deadline_timer_.cancel();
  auto pending = std::move(pending_);
  pending_.clear();
  for (Request& r : pending) finish(r, why);
  if (first_) std::exchange(first_, nullptr)(Status(Errc::cancelled, "client closed"));
}

void Connection::exec(std::string payload, std::size_t replies, ReplyHandler handler, milliseconds timeout) {
  if (state_ == State::closed) {  // never inline: the caller may be iterating
    boost::asio::post(io_, [handler = std::move(handler)] { handler({Errc::cancelled, "client closed"}, {}); });
    return;
  }
  Request r;
  r.payload = std::move(payload);
  r.expected = replies;
  r.handler = std::move(handler);
  r.deadline = Clock::now() + (timeout.count() > 0 ? timeout : config_.command_timeout);
  const auto deadline = r.deadline;
  pending_.push_back(std::move(r));
  if (deadline < deadline_armed_for_) arm_deadline_timer();
  write_pending();
}

void Connection::write_pending() {
  if (state_ != State::ready || writing_ || pending_.empty()) return;
  const auto now = Clock::now();
  while (!pending_.empty()) {
    Request& r = pending_.front();
    write_buf_ += r.payload;
    r.payload.clear();
    r.payload.shrink_to_fit();
    r.written_at = now;
    ++requests_sent_;
    inflight_.push_back(std::move(r));
    pending_.pop_front();
  }
  start_write();
}

// Writes write_buf_; requests queued meanwhile go out in the next write.
void Connection::start_write() {
  writing_ = true;
  const std::uint64_t gen = generation_;
  Connection* self = this;  // lives until the loop drains (backend.hpp)
  with_stream([&](auto& stream) {
    asio::async_write(stream, asio::buffer(write_buf_), [this, self, gen](const error_code& ec, std::size_t) {
      if (gen != generation_) return;
      writing_ = false;
      write_buf_.clear();
      if (ec) {
        connection_lost({Errc::unavailable, "write failed: " + describe(ec)});
        return;
      }
      if (config_.pubsub) {
        // Nothing answers these one by one: pushes carry the confirmations.
        while (!inflight_.empty() && inflight_.front().expected == 0) {
          Request r = std::move(inflight_.front());
          inflight_.pop_front();
          finish(r, {});
        }
      }
      write_pending();
    });
  });
}

void Connection::read_loop() {
  const std::uint64_t gen = generation_;
  Connection* self = this;  // lives until the loop drains (backend.hpp)
  with_stream([&](auto& stream) {
    stream.async_read_some(asio::buffer(read_buf_), [this, self, gen](const error_code& ec, std::size_t n) {
      if (gen != generation_) return;
      if (ec) {
        std::string why = ec == asio::error::eof ? std::string("server closed the connection") : describe(ec);
        connection_lost({Errc::unavailable, why});
        return;
      }
      on_bytes(n);
      if (gen == generation_) read_loop();
    });
  });
}

void Connection::on_bytes(std::size_t n) {
  last_read_ = Clock::now();
  reader_.feed(read_buf_.data(), n);
  const std::uint64_t gen = generation_;
  for (;;) {
    Status error;
    std::optional<Reply> reply = reader_.next(error);
    if (!error.ok()) {
      connection_lost(std::move(error));
      return;
    }
    if (!reply) return;
    dispatch(std::move(*reply));
    if (gen != generation_) return;  // a handler tore the connection down
  }
}

void Connection::dispatch(Reply&& reply) {
  // Skip requests that expect nothing (pubsub writes already finished).
  if (inflight_.empty() || (config_.pubsub && !handshake_inflight_)) {
    if (config_.pubsub && push_handler_) {
      push_handler_(std::move(reply));
      return;
    }
    connection_lost({Errc::protocol_error, "reply with no request"});
    return;
  }
  Request& r = inflight_.front();
  r.replies.push_back(std::move(reply));
  if (r.replies.size() < r.expected) return;
  Request done = std::move(r);
  inflight_.pop_front();
  if (handshake_inflight_) handshake_inflight_ = false;
  finish(done, {});
}

void Connection::finish(Request& r, Status status) {
  if (!r.handler) return;
  auto handler = std::move(r.handler);
  r.handler = nullptr;
  handler(std::move(status), std::move(r.replies));
}

void Connection::arm_deadline_timer() {
  auto earliest = Clock::time_point::max();
  for (const Request& r : pending_) earliest = std::min(earliest, r.deadline);
  for (const Request& r : inflight_)
    if (r.handler) earliest = std::min(earliest, r.deadline);
  deadline_armed_for_ = earliest;
  if (earliest == Clock::time_point::max()) {
    deadline_timer_.cancel();
    return;
  }
  Connection* self = this;  // lives until the loop drains (backend.hpp)
  deadline_timer_.expires_at(earliest);
  deadline_timer_.async_wait([this, self](const error_code& ec) {
    if (ec || state_ == State::closed) return;
    on_deadline();
  });
}

void Connection::on_deadline() {
  const auto now = Clock::now();
  deadline_armed_for_ = Clock::time_point::max();
  // Handlers run after the scan: they may queue new requests.
  std::vector<std::pair<ReplyHandler, Status>> expired;
  // Never written: the server never saw it.
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->deadline <= now) {
      expired.emplace_back(
          std::move(it->handler),
          Status(Errc::unavailable, "not connected to " + config_.endpoint.describe() + " (" +
                                        (ever_ready_ ? "reconnecting" : "connecting") + "); the command was not sent"));
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  // Written, no reply yet: in doubt. The reply may still come; it is dropped.
  bool stalled = false;
  for (Request& r : inflight_) {
    if (!r.handler || r.deadline > now) continue;
    if (last_read_ < r.written_at) stalled = true;
    if (&r == &inflight_.front() && handshake_inflight_) continue;  // the connect timer owns it
    expired.emplace_back(std::exchange(r.handler, nullptr),
                         Status(Errc::outcome_unknown, "no reply from " + config_.endpoint.describe() + " within " +
                                                           std::to_string(config_.command_timeout.count()) + " ms"));
  }
  if (stalled && state_ == State::ready) {
    // Nothing arrived since the oldest expired request was written: the
    // server or the path is dead (blackhole, stall). Start over, before the
    // handlers run: what they send now (retries) waits for the next
    // connection instead of going to this one as it is closed.
    connection_lost({Errc::unavailable, "server sent nothing within the command timeout"});
  }
  for (auto& [handler, status] : expired)
    if (handler) handler(std::move(status), {});
  if (state_ != State::closed) arm_deadline_timer();
}

}  // namespace dlock::redis

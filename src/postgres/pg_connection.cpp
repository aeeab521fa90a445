#include "postgres/pg_connection.hpp"

#include <fcntl.h>
#include <libpq-fe.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>

namespace dlock::postgres {

namespace asio = boost::asio;

Status status_of_sqlstate(const std::string& sqlstate, std::string message) {
  const std::string cls = sqlstate.substr(0, 2);
  Errc code = Errc::server_error;
  if (cls == "08" || cls == "53" || cls == "40" || sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03" ||
      sqlstate == "57014" || sqlstate == "25006" || sqlstate == "55P03")
    code = Errc::unavailable;  // connection, resources, serialization, shutdown, timeout, read-only standby
  else if (cls == "28")
    code = Errc::auth_failed;
  else if (sqlstate == "42501")
    code = Errc::permission_denied;
  else if (sqlstate == "3F000")
    code = Errc::invalid_argument;  // the URL's schema does not exist
  else if (sqlstate == "42P01" || sqlstate == "42883" || sqlstate == "42703")
    code = Errc::wrong_type;  // the lock table or its functions are missing or of another version
  return {code, "postgres: " + message, sqlstate};
}

namespace {

ino_t inode_of(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? st.st_ino : 0;
}

std::string trimmed(const char* s) {
  std::string out = s ? s : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// A connection that failed before any statement: no SQLSTATE to read, so
// the message tells (libpq's own texts).
Status connect_failure(const std::string& msg, const std::string& where) {
  auto has = [&](const char* s) { return msg.find(s) != std::string::npos; };
  Errc code = Errc::unavailable;
  if (has("password authentication failed") || has("no password supplied") || has("authentication failed") ||
      has("pg_hba.conf"))
    code = Errc::auth_failed;
  else if (has("SSL") || has("certificate") || has("ssl"))
    code = Errc::tls_failed;
  else if (has("does not exist"))
    code = Errc::invalid_argument;  // the database or role named in the URL
  return {code, "cannot connect to " + where + ": " + msg};
}

void route_notice(void* arg, const pg_result* result) {
  const auto* config = static_cast<const PgConfig*>(arg);
  if (!config->log) return;
  const char* severity = PQresultErrorField(result, PG_DIAG_SEVERITY_NONLOCALIZED);
  const bool warning = severity != nullptr && std::string_view(severity) == "WARNING";
  config->log(warning ? LogLevel::warning : LogLevel::debug, "postgres: " + trimmed(PQresultErrorMessage(result)));
}

}  // namespace

void take_result(const pg_result* res, Rows& rows, Status& error) {
  const ExecStatusType st = PQresultStatus(res);
  if (st == PGRES_TUPLES_OK) {
    for (int r = 0; r < PQntuples(res); ++r) {
      Row row;
      for (int c = 0; c < PQnfields(res); ++c)
        row.push_back(PQgetisnull(res, r, c) ? std::nullopt : std::optional<std::string>(PQgetvalue(res, r, c)));
      rows.push_back(std::move(row));
    }
  } else if (st != PGRES_COMMAND_OK && error.ok()) {
    const char* state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    error = status_of_sqlstate(state ? state : "", trimmed(PQresultErrorMessage(res)));
  }
}

pg_conn* start_libpq(const PgConfig& config) {
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : config.params) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  pg_conn* conn = PQconnectStartParams(keys.data(), values.data(), 0);
  if (conn != nullptr) PQsetNoticeReceiver(conn, &route_notice, const_cast<PgConfig*>(&config));
  return conn;
}

PgConnection::PgConnection(asio::io_context& io, PgConfig config) : io_(io), config_(std::move(config)), timer_(io) {}

PgConnection::~PgConnection() {
  forget_socket();
  if (conn_ != nullptr) PQfinish(conn_);
}

template <class F>
void PgConnection::post(F&& f) {
  asio::post(io_, std::forward<F>(f));
}

void PgConnection::connect(std::function<void(Status)> done) {
  if (state_ == State::closed) return post([done = std::move(done)] { done({Errc::cancelled, "closed"}); });
  if (state_ == State::up) return post([done = std::move(done)] { done({}); });
  connect_waiters_.push_back(std::move(done));
  if (state_ == State::down) start_connect();
}

void PgConnection::query(std::string sql, std::vector<std::string> params, std::function<void(Result<Rows>)> done) {
  if (state_ == State::closed)
    return post([done = std::move(done)] { done(Status(Errc::cancelled, "the client is closed")); });
  queue_.push_back({std::move(sql), std::move(params), std::move(done)});
  if (state_ == State::down) return start_connect();
  if (state_ == State::up && !in_flight_) send_next();
}

void PgConnection::start_connect() {
  state_ = State::connecting;
  conn_ = start_libpq(config_);
  if (conn_ == nullptr || PQstatus(conn_) == CONNECTION_BAD) {
    const std::string msg = conn_ ? trimmed(PQerrorMessage(conn_)) : "out of memory";
    return connect_done(connect_failure(msg, config_.describe));
  }
  timer_.expires_after(config_.connect_timeout);
  timer_.async_wait([this, gen = generation_](const boost::system::error_code& ec) {
    if (ec || gen != generation_ || state_ != State::connecting) return;
    connect_done({Errc::unavailable, "cannot connect to " + config_.describe + ": timed out after " +
                                         std::to_string(config_.connect_timeout.count()) + " ms"});
  });
  wait(true, [this](bool ok) {  // as libpq says: first as if PGRES_POLLING_WRITING
    if (ok) poll_connect();
  });
}

void PgConnection::poll_connect() {
  switch (PQconnectPoll(conn_)) {
    case PGRES_POLLING_READING:
      return wait(false, [this](bool ok) {
        if (ok) poll_connect();
      });
    case PGRES_POLLING_WRITING:
      return wait(true, [this](bool ok) {
        if (ok) poll_connect();
      });
    case PGRES_POLLING_OK:
      return connect_done({});
    default:
      return connect_done(connect_failure(trimmed(PQerrorMessage(conn_)), config_.describe));
  }
}

void PgConnection::connect_done(Status s) {
  timer_.cancel();
  auto waiters = std::move(connect_waiters_);
  connect_waiters_.clear();
  if (!s.ok()) {
    drop(s);  // fails the queue: nothing was sent
  } else {
    state_ = State::up;
    PQsetnonblocking(conn_, 1);
    if (was_up_) ++reconnects_;
    was_up_ = true;
    wait(false, [this](bool ok) {
      if (ok) read_reply();
    });
    send_next();
  }
  for (auto& w : waiters) post([w = std::move(w), s] { w(s); });
}

void PgConnection::send_next() {
  if (state_ != State::up || in_flight_ || queue_.empty()) return;
  in_flight_ = std::move(queue_.front());
  queue_.pop_front();
  rows_.clear();
  result_error_ = {};
  std::vector<const char*> values;
  for (const auto& p : in_flight_->params) values.push_back(p.c_str());
  if (PQsendQueryParams(conn_, in_flight_->sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                        nullptr, nullptr, 0) != 1) {
    // Not sent: the connection is broken.
    auto p = std::move(*in_flight_);
    in_flight_.reset();
    queue_.push_front(std::move(p));
    return drop({Errc::unavailable, "postgres: " + trimmed(PQerrorMessage(conn_))});
  }
  timer_.expires_after(config_.command_timeout);
  timer_.async_wait([this, gen = generation_](const boost::system::error_code& ec) {
    if (ec || gen != generation_ || !in_flight_) return;
    drop({Errc::outcome_unknown, "postgres: no reply within the command timeout (" +
                                     std::to_string(config_.command_timeout.count()) + " ms)"});
  });
  flush_then_read();
}

void PgConnection::flush_then_read() {
  const int r = PQflush(conn_);
  if (r < 0) return drop({Errc::outcome_unknown, "postgres: " + trimmed(PQerrorMessage(conn_))});
  if (r == 1)
    wait(true, [this](bool ok) {
      if (ok) flush_then_read();
    });
  // r == 0: all sent; the read loop (always armed while up) takes the reply.
}

// The read loop: armed while the connection is up, for replies,
// notifications and the server closing the connection.
void PgConnection::read_reply() {
  if (PQconsumeInput(conn_) != 1)
    return drop({in_flight_ ? Errc::outcome_unknown : Errc::unavailable,
                 "postgres: connection lost: " + trimmed(PQerrorMessage(conn_))});
  deliver_notifies();
  while (in_flight_ && PQisBusy(conn_) == 0) {
    PGresult* res = PQgetResult(conn_);
    if (res == nullptr) {
      Result<Rows> out = result_error_.ok() ? Result<Rows>(std::move(rows_)) : Result<Rows>(result_error_);
      finish_query(std::move(out));
      break;
    }
    take_result(res, rows_, result_error_);
    PQclear(res);
  }
  if (state_ == State::up)
    wait(false, [this](bool ok) {
      if (ok) read_reply();
    });
}

void PgConnection::finish_query(Result<Rows> r) {
  timer_.cancel();
  auto done = std::move(in_flight_->done);
  in_flight_.reset();
  post([done = std::move(done), r = std::move(r)]() mutable { done(std::move(r)); });
  send_next();
}

void PgConnection::deliver_notifies() {
  while (PGnotify* n = PQnotifies(conn_)) {
    std::string channel = n->relname, payload = n->extra ? n->extra : "";
    PQfreemem(n);
    if (on_notify_)
      post([this, channel = std::move(channel), payload = std::move(payload)] {
        if (state_ != State::closed && on_notify_) on_notify_(channel, payload);
      });
  }
}

// libpq owns its socket and closes it when it sees the connection fail
// (inside PQconsumeInput, PQflush, PQconnectPoll), before we hear of it; by
// then another thread may have reused the number. So the reactor watches a
// duplicate of its own, which only we close: no call of ours ever names a
// descriptor libpq may have closed. While connecting, libpq may replace its
// socket by one with the same number (the next address): the inode tells.
void PgConnection::wait(bool write, std::function<void(bool ok)> then) {
  const int fd = PQsocket(conn_);
  if (fd < 0) return drop({Errc::unavailable, "postgres: no socket"});
  const bool same = socket_ && fd == socket_fd_ && (state_ != State::connecting || inode_of(fd) == socket_inode_);
  if (!same) {
    forget_socket();
    const int mine = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (mine < 0) return drop({Errc::unavailable, std::string("postgres: dup: ") + std::strerror(errno)});
    auto watched = std::make_unique<asio::posix::stream_descriptor>(io_);
    boost::system::error_code ec;
    watched->assign(mine, ec);  // registers it with the reactor
    if (ec) {
      ::close(mine);
      return drop({Errc::unavailable, "postgres: cannot watch the socket: " + ec.message()});
    }
    socket_ = std::move(watched);
    socket_fd_ = fd;
    socket_inode_ = inode_of(mine);
  }
  socket_->async_wait(write ? asio::posix::stream_descriptor::wait_write : asio::posix::stream_descriptor::wait_read,
                      [this, gen = generation_, then = std::move(then)](const boost::system::error_code& ec) {
                        if (gen != generation_ || state_ == State::closed) return;
                        then(!ec);
                      });
}

void PgConnection::drop(Status why) {
  const bool was_up = state_ == State::up;
  ++generation_;
  timer_.cancel();
  forget_socket();
  if (conn_ != nullptr) PQfinish(conn_);
  conn_ = nullptr;
  if (state_ != State::closed) state_ = State::down;
  // Queued calls were never sent: they keep why's code (a refused login or
  // certificate says what to fix), but never "outcome unknown".
  Errc queued = why.code();
  if (state_ == State::closed)
    queued = Errc::cancelled;
  else if (why.ok() || queued == Errc::outcome_unknown)
    queued = Errc::unavailable;
  if (in_flight_) {
    auto done = std::move(in_flight_->done);
    in_flight_.reset();
    post([done = std::move(done), why] { done(why); });
  }
  for (auto& p : queue_)
    post([done = std::move(p.done), s = Status(queued, why.message(), why.backend_code())] { done(s); });
  queue_.clear();
  auto waiters = std::move(connect_waiters_);
  connect_waiters_.clear();
  for (auto& w : waiters) post([w = std::move(w), why] { w(why); });
  if (was_up && on_down_)
    post([this] {
      if (state_ != State::closed && on_down_) on_down_();
    });
}

void PgConnection::forget_socket() {
  if (socket_) {
    boost::system::error_code ignored;
    socket_->close(ignored);  // our duplicate; libpq's own is PQfinish's
  }
  socket_.reset();
  socket_fd_ = -1;
  socket_inode_ = 0;
}

void PgConnection::close() {
  if (state_ == State::closed) return;
  state_ = State::closed;
  drop({Errc::cancelled, "the client is closed"});
}

}  // namespace dlock::postgres

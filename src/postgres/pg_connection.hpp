// One libpq connection driven by the client's I/O loop: nonblocking, the
// socket watched by Asio, one statement at a time (each one round trip),
// notifications (LISTEN) passed on. All calls and callbacks on the I/O
// thread; every callback runs from a handler of its own, exactly once.
#ifndef DLOCK_POSTGRES_PG_CONNECTION_HPP_
#define DLOCK_POSTGRES_PG_CONNECTION_HPP_

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/options.hpp"

struct pg_conn;
struct pg_result;

namespace dlock::postgres {

struct PgConfig {
  // libpq connection keywords (host, port, dbname, user, password, sslmode,
  // sslrootcert, ...), passed as they are.
  std::vector<std::pair<std::string, std::string>> params;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds command_timeout{5000};
  std::string describe;  // for messages: the URL without its password
  // The server's notices and warnings (libpq prints them on stderr
  // otherwise); called on whichever thread reads the reply.
  std::function<void(LogLevel, std::string_view)> log;
};

// PQconnectStartParams with config.params, the notices routed to
// config.log (the config must outlive the connection). Null: out of memory.
pg_conn* start_libpq(const PgConfig& config);

using Row = std::vector<std::optional<std::string>>;
using Rows = std::vector<Row>;

// The Status for a failed result: the SQLSTATE as the backend code and an
// Errc for what the caller should do next.
Status status_of_sqlstate(const std::string& sqlstate, std::string message);

// Adds one result of a statement to what it returned: its rows to `rows`,
// or, for the first failed one, its error to `error`. Does not free it.
void take_result(const pg_result* res, Rows& rows, Status& error);

class PgConnection {
 public:
  PgConnection(boost::asio::io_context& io, PgConfig config);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Connects if not connected (queries also connect on demand).
  void connect(std::function<void(Status)> done);
  // Sends `sql` with text parameters. unavailable: not sent (no
  // connection); outcome_unknown: sent, but the connection dropped or the
  // command timeout passed before the reply.
  void query(std::string sql, std::vector<std::string> params, std::function<void(Result<Rows>)> done);
  // NOTIFY payloads of channels this connection LISTENs to.
  void on_notify(std::function<void(const std::string& channel, const std::string& payload)> f) {
    on_notify_ = std::move(f);
  }
  // The connection dropped (after it had been up).
  void on_down(std::function<void()> f) { on_down_ = std::move(f); }
  // Fails everything outstanding with cancelled; no callback after those.
  void close();
  bool up() const { return state_ == State::up; }
  std::uint64_t reconnects() const { return reconnects_; }

 private:
  enum class State { down, connecting, up, closed };
  struct Pending {
    std::string sql;
    std::vector<std::string> params;
    std::function<void(Result<Rows>)> done;
  };

  void start_connect();
  void poll_connect();
  void connect_done(Status s);
  void send_next();
  void flush_then_read();
  void read_reply();
  void finish_query(Result<Rows> r);
  void drop(Status why);
  void forget_socket();
  void wait(bool write, std::function<void(bool ok)> then);
  void deliver_notifies();
  template <class F>
  void post(F&& f);

  boost::asio::io_context& io_;
  PgConfig config_;
  pg_conn* conn_ = nullptr;
  State state_ = State::down;
  // A duplicate of libpq's socket (see wait()), and which socket it is.
  std::unique_ptr<boost::asio::posix::stream_descriptor> socket_;
  int socket_fd_ = -1;
  ino_t socket_inode_ = 0;
  boost::asio::steady_timer timer_;  // connect or command timeout
  std::deque<Pending> queue_;
  std::optional<Pending> in_flight_;
  Rows rows_;
  Status result_error_;
  std::vector<std::function<void(Status)>> connect_waiters_;
  std::function<void(const std::string&, const std::string&)> on_notify_;
  std::function<void()> on_down_;
  std::uint64_t generation_ = 0;  // bumped by every drop: stale handlers stop
  std::uint64_t reconnects_ = 0;
  bool was_up_ = false;
};

}  // namespace dlock::postgres

#endif  // DLOCK_POSTGRES_PG_CONNECTION_HPP_

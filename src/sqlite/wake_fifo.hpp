// A client's own door beside a SQLite lock file, through which a release
// wakes one of its waiters and nobody else: a FIFO at
// "<db>-waiters/<client id>", read by the client's I/O thread while it
// lives. A releaser writes one line to it after its commit (a turn or a
// stand-by, waiter_turns.hpp). A FIFO nobody reads cannot be opened for
// writing (ENXIO): its client is gone, so the releaser passes the turn on,
// as a Redis PUBLISH that reached no subscriber, and removes the FIFO.
//
// Where no FIFO can be made (a file system without them), the client's
// plain waiters wait as the fair ones do: on the wake file (wakeups.hpp).
#ifndef DLOCK_SQLITE_WAKE_FIFO_HPP_
#define DLOCK_SQLITE_WAKE_FIFO_HPP_

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <functional>
#include <string>
#include <string_view>

#include "dlock/error.hpp"

namespace dlock::sqlite {

class WakeFifo {
 public:
  WakeFifo(boost::asio::io_context& io, const std::string& db_path, std::string client_id);
  ~WakeFifo() { close(); }
  WakeFifo(const WakeFifo&) = delete;
  WakeFifo& operator=(const WakeFifo&) = delete;

  // Makes and opens the FIFO (I/O thread); `line` runs on the I/O thread
  // for each line written to it. Also removes a few FIFOs whose clients
  // are gone.
  Status open(std::function<void(std::string_view line)> line);
  bool is_open() const { return fd_.is_open(); }
  // The FIFO at its path is still the one this client reads: a door removed
  // (its directory with it) or replaced cannot be written to by releasers.
  bool intact();
  // Makes the door again, with the same reader.
  Status reopen();
  // Removes the FIFO; nothing runs after.
  void close();

  // What became of a line sent to client `client_id` of the lock file.
  enum class Sent { delivered, gone };
  // Any thread. A line is at most PIPE_BUF bytes, so lines never mix.
  static Sent send(const std::string& db_path, const std::string& client_id, std::string_view line);
  static std::string dir_of(const std::string& db_path) { return db_path + "-waiters"; }

 private:
  void read_more();
  void sweep();

  std::string db_path_, dir_, path_;
  boost::asio::posix::stream_descriptor fd_;
  std::function<void(std::string_view)> line_;
  std::array<char, 4096> buf_{};
  std::string partial_;
  bool closed_ = false;
};

}  // namespace dlock::sqlite

#endif  // DLOCK_SQLITE_WAKE_FIFO_HPP_

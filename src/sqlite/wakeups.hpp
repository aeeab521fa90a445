// How processes sharing a SQLite lock file learn of releases without
// polling. A releaser writes a byte to the "-wake" file beside the database
// after its commit; every process watches the directory with inotify and,
// on a write to that file, checks the names it waits for. A holder that dies
// without releasing is seen through a pidfd on its process. Both are hints:
// a missed one costs at most the holder's remaining lease, the waiter's cap.
#ifndef DLOCK_SQLITE_WAKEUPS_HPP_
#define DLOCK_SQLITE_WAKEUPS_HPP_

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "dlock/error.hpp"
#include "sqlite/host.hpp"

namespace dlock::sqlite {

class Wakeups {
 public:
  Wakeups(boost::asio::io_context& io, std::string db_path);
  ~Wakeups();

  // Creates the wake file and an inotify instance. While listening, `rung`
  // runs (on the I/O thread) after writes to the wake file by any process,
  // this one included.
  Status open(std::function<void()> rung);
  // Listens only while this process waits for something: the I/O thread is
  // not woken by every commit of every process otherwise. Turned on before
  // the waiter's next attempt, so no release after it is missed.
  Status listen(bool on);
  // Tells every watcher that something was released.
  void ring();
  // `died` runs once if process `p` exits while watched under `name`.
  void watch_process(const std::string& name, const ProcessId& p, std::function<void()> died);
  void forget_process(const std::string& name);
  // Cancels every wait; no callback runs after the loop drains.
  void close();

 private:
  void read_events();

  boost::asio::io_context& io_;
  std::string dir_, wake_name_;
  int wake_fd_ = -1;
  int watch_ = -1;  // the inotify watch descriptor while listening
  std::unique_ptr<boost::asio::posix::stream_descriptor> inotify_;
  alignas(8) std::array<char, 4096> buf_{};
  std::function<void()> rung_;
  struct Pidfd {
    pid_t pid = 0;
    std::unique_ptr<boost::asio::posix::stream_descriptor> fd;
  };
  std::map<std::string, Pidfd> pids_;
  bool closed_ = false;
};

}  // namespace dlock::sqlite

#endif  // DLOCK_SQLITE_WAKEUPS_HPP_

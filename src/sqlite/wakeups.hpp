// How processes sharing a SQLite lock file learn of releases without
// polling. A releaser writes a byte to the "-wake" file beside the database
// after its commit; every process watches the directory with inotify and,
// on a write to that file, checks the names it waits for. A holder that dies
// without releasing is seen through a pidfd on its process. Both are hints:
// a missed one costs at most the holder's remaining lease, the waiter's cap.
// The same inotify watch tells when the database file's name is deleted,
// renamed or replaced, so holders learn of it at once.
//
// One inotify instance serves a whole process (wake_hub.cpp): instances
// are a per-user limit (128 by default), and a process of 200 clients,
// each with its own, ran out. Where none can be had at all, a waiting
// client looks at the wake file every kPollEvery instead.
#ifndef DLOCK_SQLITE_WAKEUPS_HPP_
#define DLOCK_SQLITE_WAKEUPS_HPP_

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "dlock/error.hpp"
#include "sqlite/host.hpp"

namespace dlock::sqlite {

struct WakeSub;  // wake_hub.hpp

class Wakeups {
 public:
  Wakeups(boost::asio::io_context& io, std::string db_path);
  ~Wakeups();

  // Creates the wake file and joins the process's inotify instance on the
  // directory. While listening, `rung` runs (on the I/O thread) after
  // writes to the wake file by any process, this one included; `moved`
  // runs after the database file's name was deleted, renamed or made.
  // Without inotify (instances used up: a warning is logged by the caller
  // from the status) the wake file is looked at every kPollEvery while
  // listening, and a moved name is found at the next renewal.
  Status open(std::function<void()> rung, std::function<void()> moved);
  // Why there are no release notifications from inotify (ok if there are).
  const Status& inotify_status() const { return inotify_status_; }
  // Listens only while this client waits for something: its I/O thread is
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

  static constexpr std::chrono::milliseconds kPollEvery{50};

 private:
  void poll_soon();

  boost::asio::io_context& io_;
  std::string dir_, db_name_, wake_name_;
  std::shared_ptr<WakeSub> sub_;  // in the process's inotify instance; null without one
  bool listening_ = false;
  boost::asio::steady_timer poll_;  // without inotify, while listening
  std::uint64_t seen_ = 0;          // what the poll last read in the wake file
  std::function<void()> rung_;
  struct Pidfd {
    pid_t pid = 0;
    std::unique_ptr<boost::asio::posix::stream_descriptor> fd;
  };
  std::map<std::string, Pidfd> pids_;
  Status inotify_status_;
  bool closed_ = false;
};

}  // namespace dlock::sqlite

#endif  // DLOCK_SQLITE_WAKEUPS_HPP_

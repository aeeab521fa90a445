// Cuts a socket at a deadline: for calls that block in code the
// coordinator does not own (a 2PC branch's work on its libpq connection),
// so that a server that stops answering cannot hold them past it.
// shutdown(2) makes the blocked read return at once; the connection is
// then broken and is not reused.
#ifndef DLOCK_TX_SOCKET_CUTTER_HPP_
#define DLOCK_TX_SOCKET_CUTTER_HPP_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

namespace dlock::tx::detail {

class SocketCutter {
 public:
  using Clock = std::chrono::steady_clock;

  SocketCutter() = default;
  ~SocketCutter();  // joins its thread; every arm must be disarmed by then
  SocketCutter(const SocketCutter&) = delete;
  SocketCutter& operator=(const SocketCutter&) = delete;

  // Shuts `fd`'s socket down at `at` unless disarmed first. Returns the
  // ticket for disarm(). It keeps a duplicate of `fd`, so the socket it
  // cuts is this one even if its owner closes `fd` meanwhile (libpq does on
  // some errors) and the number is reused. The thread starts on first use.
  std::uint64_t arm(int fd, Clock::time_point at);
  // Closes the duplicate. True if the socket was cut.
  bool disarm(std::uint64_t ticket);

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable changed_;
  struct Armed {
    int fd;  // our duplicate (-1: dup failed, nothing to cut)
    Clock::time_point at;
    bool cut = false;
  };
  std::map<std::uint64_t, Armed> armed_;  // under mu_
  std::uint64_t next_ = 1;                // under mu_
  bool stopping_ = false;                 // under mu_
  std::thread thread_;
};

}  // namespace dlock::tx::detail

#endif  // DLOCK_TX_SOCKET_CUTTER_HPP_

// A loopback TCP listener for the faults a client meets in the network,
// below what the verifier's proxy does:
//
//   dlock::test::TcpFault proxy(redis_port);   // forwards to the server
//   proxy.delay_ms = 1500;   // each answer chunk in two pieces, 1.5 s apart
//   proxy.stall();           // new connections hang in SYN, open ones end
//
//   dlock::test::TcpFault closes;               // accepts and closes at once
#ifndef DLOCK_TESTS_SUPPORT_TCP_FAULT_HPP_
#define DLOCK_TESTS_SUPPORT_TCP_FAULT_HPP_

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "common/syn_drop.hpp"

namespace dlock::test {

class TcpFault {
 public:
  // With `upstream`, a proxy to 127.0.0.1:upstream; without, a server that
  // accepts and closes each connection at once (a handshake cut short: a
  // restart, maxclients). Throws std::runtime_error if it cannot listen.
  explicit TcpFault(int upstream = 0);
  ~TcpFault();
  TcpFault(const TcpFault&) = delete;
  TcpFault& operator=(const TcpFault&) = delete;

  int port() const { return port_; }
  // Each chunk of the server's answers is handed on in two pieces, the
  // second this long after the first (a TLS record arriving in pieces).
  std::atomic<int> delay_ms{0};

  // A host gone from the network: the connections open end (both peers see
  // them closed), and new ones are never accepted: the listener's queue is
  // filled, so the kernel drops their SYNs and a connect waits for its own
  // timeout, as for a host that does not answer. Returns once in force.
  void stall();

  // The connections open end (both peers see them closed); new ones are
  // accepted and forwarded as before (a restart of whatever is in between).
  void drop_connections();

  // Whether a connect to port() completes within `limit` (false: it hangs).
  bool connects_within(std::chrono::milliseconds limit) const;

 private:
  void accept_loop();
  void pump(int from, int to, bool split);

  int upstream_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stalled_{false};
  std::mutex mu_;
  std::vector<int> fds_;     // forwarded pairs' sockets
  tools::SynDrop syn_drop_;  // stall()'s
  std::vector<std::thread> threads_;
};

}  // namespace dlock::test

#endif  // DLOCK_TESTS_SUPPORT_TCP_FAULT_HPP_

// tools/common/syn_drop.hpp: a listening port that stops answering new
// connections, as a host gone from the network does (the tests' TcpFault,
// the verifier's proxy). Its accept queue is cut to one and filled with
// connections never accepted: the kernel then drops every SYN to the port,
// and a client's connect waits for its own timeout instead of being refused.
//
//   dlock::tools::SynDrop drop;
//   drop.begin(listener_fd);          // stop accepting on it first
//   ...
//   drop.end(listener_fd, SOMAXCONN); // the retransmitted SYNs get in
#ifndef DLOCK_TOOLS_COMMON_SYN_DROP_HPP_
#define DLOCK_TOOLS_COMMON_SYN_DROP_HPP_

#include <vector>

namespace dlock::tools {

class SynDrop {
 public:
  SynDrop() = default;
  ~SynDrop() { close(); }
  SynDrop(const SynDrop&) = delete;
  SynDrop& operator=(const SynDrop&) = delete;

  // Fills the queue of `listener` (a socket listening on 127.0.0.1). The
  // caller accepts nothing on it until end().
  void begin(int listener);
  // The queue back to `backlog`, the queued connections closed.
  void end(int listener, int backlog);
  // Closes the queued connections only (the listener is going).
  void close();

 private:
  std::vector<int> fillers_;  // client ends of connections never accepted
};

// A non-blocking connect to 127.0.0.1:port, left in flight; -1 on error.
int connect_nowait(int port);

}  // namespace dlock::tools

#endif  // DLOCK_TOOLS_COMMON_SYN_DROP_HPP_

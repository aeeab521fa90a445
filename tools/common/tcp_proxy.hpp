// tools/common/tcp_proxy.hpp: a fault-injecting TCP proxy, run in-process by
// the verifier's orchestrator, the tests and the order experiment (the
// kernel has no netem and toxiproxy is not packaged; see section 8 of the
// correctness test plan).
//
//   dlock::tools::Proxy proxy("127.0.0.1", redis_port);
//   std::uint16_t p = proxy.add_link("w0");   // worker 0 connects to 127.0.0.1:p
//   proxy.start();
//   proxy.blackhole("w0", true);  ...  proxy.blackhole("w0", false);
//   auto s = proxy.stats("w0");   // proof that the fault took effect
//
// Every link listens on its own loopback port and forwards each accepted
// connection to the one upstream. Faults are per link ("" = every link) and
// are in force once the call returns. All bytes of one direction keep their
// order whatever the faults do. One internal thread does all the I/O.
#ifndef DLOCK_TOOLS_COMMON_TCP_PROXY_HPP_
#define DLOCK_TOOLS_COMMON_TCP_PROXY_HPP_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dlock::tools {

class Proxy {
 public:
  // Does not start; resolves nothing yet. Throws nothing.
  Proxy(std::string upstream_host, std::uint16_t upstream_port);
  // Stops the thread and closes every listener and connection.
  ~Proxy();

  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  // Listens on 127.0.0.1, port chosen by the kernel, and returns the port.
  // Callable before or after start(). Throws std::invalid_argument if the
  // name is empty or taken, std::system_error if it cannot listen.
  std::uint16_t add_link(const std::string& name);

  // Runs the I/O on one internal thread. Throws std::logic_error if already
  // started; a Proxy is started once.
  void start();

  // Faults, for the named link or every link when `link` is "". They are
  // applied on the I/O thread and in force when the call returns. An unknown
  // name throws std::invalid_argument.

  // Adds `each_way` to every chunk in both directions (0 = none). Changing
  // it leaves chunks already queued alone.
  void set_delay(const std::string& link, std::chrono::milliseconds each_way);
  // Server->client bytes that arrive while this is set are delivered `d`
  // after their arrival, on top of any delay: the reply is late, as if the
  // client paused right after sending. 0 = off.
  void hold_replies(const std::string& link, std::chrono::milliseconds d);
  // Partition: nothing is forwarded either way while on. Bytes read
  // meanwhile are kept and delivered after healing (as TCP retransmits after
  // a partition heals) unless the connection is closed by then. Connections
  // accepted meanwhile reach the upstream only after healing.
  void blackhole(const std::string& link, bool on);
  // Lost replies: requests still reach the server; a reply (any
  // server->client byte) is discarded and the connection pair is reset, so
  // the client sees its connection die with the request in flight.
  void drop_replies(const std::string& link, bool on);
  // Resets every open connection pair of the link now (SO_LINGER 0 + close
  // on both sides: both peers see ECONNRESET).
  void reset(const std::string& link);
  // New connections go to this port from now on (a failover to a promoted
  // replica); open ones are left alone: reset() them to move them.
  void set_upstream_port(std::uint16_t port);
  // While on, new connections are accepted and immediately reset.
  void refuse(const std::string& link, bool on);
  // A host gone from the network: open connections hang as in a blackhole,
  // and new ones are not accepted (the listener's queue is cut to one and
  // filled, so the kernel drops their SYNs and a client's connect waits for
  // its own timeout). Off: the retransmitted SYNs get in.
  void unreachable(const std::string& link, bool on);

  struct Stats {
    std::uint64_t connections = 0;     // accepted and forwarded (not refused)
    std::uint64_t bytes_up = 0;        // client->server bytes delivered
    std::uint64_t bytes_down = 0;      // server->client bytes delivered
    std::uint64_t bytes_dropped = 0;   // read but never delivered (drop_replies, lost at a reset/close)
    std::uint64_t resets = 0;          // pairs reset by the proxy: reset(), drop_replies,
                                       // upstream unreachable, a peer's RST passed on
    std::uint64_t held_chunks = 0;     // reply chunks given a hold_replies delay
    std::uint64_t delayed_chunks = 0;  // chunks given a set_delay delay
    std::uint64_t refused = 0;         // connections reset by refuse()
    // Longest time any chunk spent in the proxy between being read and its
    // write starting (delay, hold or blackhole), in ms.
    std::int64_t max_delay_applied_ms = 0;
  };
  // Counters since add_link; for "" the sum over all links (max for
  // max_delay_applied_ms). Unknown name: std::invalid_argument.
  Stats stats(const std::string& link) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One client's whole network when its lock spans several servers (Redlock:
// one proxy per server, the same link names on each): every fault applies to
// every proxy, and stats() sums them.
class ProxyGroup {
 public:
  void add(Proxy* p) { proxies_.push_back(p); }
  void set_delay(const std::string& link, std::chrono::milliseconds each_way);
  void hold_replies(const std::string& link, std::chrono::milliseconds d);
  void blackhole(const std::string& link, bool on);
  void drop_replies(const std::string& link, bool on);
  void reset(const std::string& link);
  void refuse(const std::string& link, bool on);
  void unreachable(const std::string& link, bool on);
  Proxy::Stats stats(const std::string& link) const;

 private:
  std::vector<Proxy*> proxies_;
};

}  // namespace dlock::tools

#endif  // DLOCK_TOOLS_COMMON_TCP_PROXY_HPP_

// A private ZooKeeper 3.8 ensemble for a test, a verifier run or a demo:
// N servers (3 by default; 1 runs standalone) on free loopback
// ports in a temp dir, each its own JVM, stopped and removed when the object
// goes. Timing is scaled for tests: tickTime 200 ms, so elections take well
// under a second and sessions may be as short as 400 ms.
//
//   ZooKeeperEnsemble zk;                        // 3 servers, a leader elected
//   auto client = Client::connect("zk://" + zk.hosts());
//   zk.kill(zk.leader());                        // the others elect anew
#ifndef DLOCK_TOOLS_COMMON_ZK_ENSEMBLE_HPP_
#define DLOCK_TOOLS_COMMON_ZK_ENSEMBLE_HPP_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace dlock::tools {

class ZooKeeperEnsemble {
 public:
  // Starts every server and waits (up to 60 s) until a quorum serves.
  // Throws std::runtime_error naming the server whose start failed.
  // `parent`: where its temp dir goes ("": $TMPDIR or /tmp).
  explicit ZooKeeperEnsemble(int servers = 3, const std::string& parent = "");

  // Where server `viewer` reaches server `peer`'s quorum or election
  // port `port`: the port written in the viewer's zoo.cfg (127.0.0.1). A
  // proxy in between can then cut one server off from the others while
  // its client port stays up (a follower partitioned from its leader):
  //
  //   ZooKeeperEnsemble zk(3, "", [&](int viewer, int, int port) {
  //     return viewer == 0 ? start_proxy_to(port) : port;
  //   });
  //
  // A follower reaches its leader at the leader's quorum port; election
  // links are made from the higher server id to the lower one, so server
  // 0 (id 1) opens every link of its own.
  using PeerRoute = std::function<int(int viewer, int peer, int port)>;
  ZooKeeperEnsemble(int servers, const std::string& parent, PeerRoute route);
  ~ZooKeeperEnsemble();  // SIGKILL what still runs, temp dir removed
  ZooKeeperEnsemble(const ZooKeeperEnsemble&) = delete;
  ZooKeeperEnsemble& operator=(const ZooKeeperEnsemble&) = delete;

  static constexpr int kTickMs = 200;  // tickTime: sessions expire in ticks
  int size() const { return static_cast<int>(nodes_.size()); }
  int client_port(int i) const { return nodes_.at(i).client_port; }
  pid_t pid(int i) const { return nodes_.at(i).pid; }  // -1 when stopped
  // "127.0.0.1:P1,127.0.0.1:P2,..." of every server.
  std::string hosts() const;
  // What server i says of itself (the `srvr` command): "leader", "follower",
  // "standalone", or "" when it does not serve (down, paused, no quorum).
  std::string mode(int i) const;
  int leader() const;  // the server in mode "leader"; -1 if none
  // A four-letter command's reply from server i ("mntr", "srvr"...; only
  // the whitelisted ones answer); "" when it does not answer within 2 s.
  std::string four_letter(int i, const char* cmd) const;
  // Waits until a quorum serves (a leader, or a standalone server).
  bool wait_serving(std::chrono::milliseconds limit) const;

  void stop(int i);    // SIGTERM, reaped (SIGKILL after 10 s)
  void kill(int i);    // SIGKILL, reaped
  void start(int i);   // again, same ports and data; does not wait
  void pause(int i);   // SIGSTOP: the server is alive but silent
  void restart_all();  // SIGKILL every server, then start them all again
  void resume(int i);  // SIGCONT
  const std::string& dir() const { return dir_; }

 private:
  struct Node {
    int client_port = 0, quorum_port = 0, election_port = 0;
    pid_t pid = -1;
  };
  void write_config(int i) const;
  std::string wait_started(std::chrono::milliseconds limit);
  std::string log_tail(int i, std::size_t bytes) const;
  std::string dir_;
  std::vector<Node> nodes_;
  PeerRoute route_;
};

// True if Debian's zookeeper package (the server jar) and java are installed.
bool zookeeper_available();

}  // namespace dlock::tools

#endif  // DLOCK_TOOLS_COMMON_ZK_ENSEMBLE_HPP_

// tools/common/etcd_cluster.hpp: a private etcd cluster (Debian's
// etcd-server 3.4) of N members on free loopback ports in a temp dir, for a
// test, a verifier run or a demo: started together, healthy before the constructor
// returns, each member stopped (and only those) when the object goes.
//
//   EtcdCluster etcd({.members = 3});
//   auto client = Client::connect(etcd.url());
//   etcd.kill(etcd.leader());  // the others elect anew
#ifndef DLOCK_TOOLS_COMMON_ETCD_CLUSTER_HPP_
#define DLOCK_TOOLS_COMMON_ETCD_CLUSTER_HPP_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/capture.hpp"
#include "common/child_process.hpp"

namespace dlock::tools {

class EtcdCluster {
 public:
  struct Options {
    int members = 3;
    // TLS only: called with dir() to write ca.crt, server.crt and server.key
    // (for 127.0.0.1), and client.crt and client.key of the same CA, which
    // every client must show; url() and etcdctl() use them. Null: plain.
    std::function<void(const std::string& dir)> make_tls;
    std::vector<std::string> extra;  // more flags for every member
    std::string parent;              // where the temp dir goes ("": /tmp)
    // The port member i advertises as its peer port, given its real one:
    // the others reach it there (a proxy in between decides what they hear
    // of it; it still hears them, on links it opens itself). Null: direct.
    std::function<int(int member, int peer_port)> peer_route;
    bool fsync = false;  // tests want speed; the verifier's leader kills want durability
  };
  // Throws std::runtime_error naming the step that failed.
  explicit EtcdCluster(Options options);
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  int size() const { return static_cast<int>(client_ports_.size()); }
  int client_port(int i) const { return client_ports_.at(static_cast<std::size_t>(i)); }
  // "127.0.0.1:PORT" of each member's client port.
  std::vector<std::string> endpoints() const;
  // The same, comma-separated, as etcdctl's --endpoints takes them.
  std::string endpoint_list() const;
  // etcd://ENDPOINTS[/prefix]: dlock's URL of the cluster (etcd+tls://
  // with the certificates when TLS).
  std::string url(const std::string& path = "") const;
  // Runs etcdctl (API v3) against the cluster (or member `only`) with
  // `args`, to its end or `timeout`.
  RunResult etcdctl(const std::vector<std::string>& args, std::chrono::milliseconds timeout = std::chrono::seconds(10),
                    int only = -1) const;
  // The keys starting with `prefix` and their create revisions, oldest
  // first (read with etcdctl).
  std::vector<std::pair<std::string, std::uint64_t>> keys(const std::string& prefix) const;
  // Starts etcdctl with `args` in the background (its own process group),
  // its output to `output_file` in dir().
  Child etcdctl_spawn(const std::vector<std::string>& args, const std::string& output_file) const;
  // The index of the member that leads now (-1: none answered).
  int leader() const;
  // The watch streams member i serves now (its /metrics gauge), -1 when it
  // does not answer within 2 s. Plain (not TLS) clusters only.
  int watch_streams(int i) const;
  // Waits until a member says it leads; false after `limit`.
  bool wait_leader(std::chrono::milliseconds limit) const;
  pid_t pid(int i) const { return members_.at(static_cast<std::size_t>(i)).pid; }  // -1 when stopped
  void pause(int i);                                                               // SIGSTOP: alive, silent
  void resume(int i);                                                              // SIGCONT
  void kill(int i);                                                                // SIGKILL, reaped
  void start(int i);  // again, same ports and data; does not wait
  const std::string& dir() const { return dir_; }

 private:
  std::vector<std::string> member_argv(int i) const;
  void stop();  // every member, and the dir
  std::vector<std::string> etcdctl_argv(const std::string& endpoints) const;

  Options options_;
  std::string dir_, initial_;
  std::vector<int> client_ports_, peer_ports_, advertised_;
  std::vector<Child> members_;
};

// True if etcd and etcdctl are installed.
bool etcd_available();

}  // namespace dlock::tools

#endif  // DLOCK_TOOLS_COMMON_ETCD_CLUSTER_HPP_

// tests/support/etcd_cluster.hpp: a private etcd cluster (Debian's
// etcd-server 3.4) of `members` members on free loopback ports in a temp
// dir, for one test: started together, healthy before the constructor
// returns, each member stopped (and only those) when the object goes.
// Without fsync (tests want speed).
//
//   EtcdCluster etcd(3);
//   etcd.endpoints();  // {"127.0.0.1:P1", "127.0.0.1:P2", "127.0.0.1:P3"}
#ifndef DLOCK_TESTS_SUPPORT_ETCD_CLUSTER_HPP_
#define DLOCK_TESTS_SUPPORT_ETCD_CLUSTER_HPP_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "support/process.hpp"

namespace dlock::test {

class EtcdCluster {
 public:
  // tls: the members serve TLS only, with a certificate of a CA made in
  // dir() (ca.crt), and ask every client for one of it (client.crt,
  // client.key); url() and etcdctl() use them.
  // `extra`: more flags for every member.
  explicit EtcdCluster(int members = 3, bool tls = false,
                       std::vector<std::string> extra = {});  // throws std::runtime_error, naming the step that failed
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // "127.0.0.1:PORT" of each member's client port.
  std::vector<std::string> endpoints() const;
  // The same, comma-separated, as etcdctl's --endpoints takes them.
  std::string endpoint_list() const;
  // etcd://ENDPOINTS[/prefix][?query]: dlock's URL of the cluster.
  std::string url(const std::string& path = "") const;
  // Runs etcdctl (API v3) against the cluster with `args`, to its end or
  // `timeout`.
  RunResult etcdctl(const std::vector<std::string>& args,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  // The keys starting with `prefix` and their create revisions, oldest
  // first (read with etcdctl).
  std::vector<std::pair<std::string, std::uint64_t>> keys(const std::string& prefix) const;
  // Starts etcdctl with `args` in the background (its own process group),
  // its output to `output_file` in dir().
  Child etcdctl_spawn(const std::vector<std::string>& args, const std::string& output_file) const;
  // The index of the member that leads now (-1: none answered).
  int leader() const;
  // Member i stopped (SIGSTOP: alive, silent) or going on (SIGCONT).
  void pause(int i);
  void resume(int i);
  const std::string& dir() const { return dir_; }

 private:
  void start(int members, const std::string& initial);
  void stop();  // every member, and the dir

  std::vector<std::string> etcdctl_argv(const std::string& endpoints) const;

  bool tls_ = false;
  std::vector<std::string> extra_;
  std::string dir_;
  std::vector<int> client_ports_, peer_ports_;
  std::vector<Child> members_;
};

// True if etcd and etcdctl are installed.
bool etcd_available();

}  // namespace dlock::test

#endif  // DLOCK_TESTS_SUPPORT_ETCD_CLUSTER_HPP_

// tests/support/etcd_cluster.hpp: the tests' private etcd cluster
// (tools/common/etcd_cluster), without fsync, with the test CA's
// certificates when TLS.
//
//   EtcdCluster etcd(3);
//   etcd.endpoints();  // {"127.0.0.1:P1", "127.0.0.1:P2", "127.0.0.1:P3"}
#ifndef DLOCK_TESTS_SUPPORT_ETCD_CLUSTER_HPP_
#define DLOCK_TESTS_SUPPORT_ETCD_CLUSTER_HPP_

#include <string>
#include <vector>

#include "common/etcd_cluster.hpp"
#include "support/process.hpp"

namespace dlock::test {

class EtcdCluster : public tools::EtcdCluster {
 public:
  // tls: the members serve TLS only, with a certificate of a CA made in
  // dir() (ca.crt), and ask every client for one of it (client.crt,
  // client.key). `extra`: more flags for every member.
  explicit EtcdCluster(int members = 3, bool tls = false, std::vector<std::string> extra = {});
};

using tools::etcd_available;

}  // namespace dlock::test

#endif  // DLOCK_TESTS_SUPPORT_ETCD_CLUSTER_HPP_

#include "support/etcd_cluster.hpp"

#include "support/redis_server.hpp"

namespace dlock::test {
namespace {

tools::EtcdCluster::Options options_of(int members, bool tls, std::vector<std::string> extra) {
  tools::EtcdCluster::Options o;
  o.members = members;
  o.extra = std::move(extra);
  if (tls)
    o.make_tls = [](const std::string& dir) {
      make_ca(dir, "ca");
      make_leaf(dir, "server", "127.0.0.1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
      make_leaf(dir, "client", "dlock-test-client", "extendedKeyUsage=clientAuth\n");
    };
  return o;
}

}  // namespace

EtcdCluster::EtcdCluster(int members, bool tls, std::vector<std::string> extra)
    : tools::EtcdCluster(options_of(members, tls, std::move(extra))) {}

}  // namespace dlock::test

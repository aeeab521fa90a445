// tests/support/zookeeper_server.hpp: the private ZooKeeper ensemble the
// tests start (tools/common/zk_ensemble.hpp, shared with the verifier).
//
//   ZooKeeperEnsemble zk;                        // 3 servers, a leader elected
//   auto client = Client::connect("zk://" + zk.hosts());
//   zk.kill(zk.leader());                        // the others elect anew
#ifndef DLOCK_TESTS_SUPPORT_ZOOKEEPER_SERVER_HPP_
#define DLOCK_TESTS_SUPPORT_ZOOKEEPER_SERVER_HPP_

#include <dlock/options.hpp>
#include <string>
#include <string_view>

#include "common/zk_ensemble.hpp"

namespace dlock::test {

using tools::zookeeper_available;
using tools::ZooKeeperEnsemble;

// Options whose logger drops everything (the tests assert on outcomes).
inline ClientOptions silent() {
  ClientOptions o;
  o.logger = [](LogLevel, std::string_view) {};
  return o;
}

// A zk:// URL of `hosts`, with query parameters if any.
inline std::string url(const std::string& hosts, const std::string& params = "") {
  return "zk://" + hosts + (params.empty() ? "" : "?" + params);
}

}  // namespace dlock::test

#endif  // DLOCK_TESTS_SUPPORT_ZOOKEEPER_SERVER_HPP_

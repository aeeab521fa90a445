// backend_family(): the one map of URL schemes to backend families, which
// ClientStats::backend and the dlock tool's advice read; and the option
// only some families honour (wait_replicas), refused by the others.
#include <gtest/gtest.h>

#include <dlock/client.hpp>
#include <string>

#include "backend_registry.hpp"

namespace dlock {
namespace {

TEST(BackendFamily, EverySchemeThisBuildServesHasAFamily) {
  for (const auto& s : detail::backend_schemes())
    EXPECT_FALSE(backend_family(std::string(s.scheme) + "://host").empty()) << s.scheme;
}

TEST(BackendFamily, SchemesMapToTheirFamiliesAndOthersToNone) {
  EXPECT_EQ(backend_family("rediss://h"), "redis");
  EXPECT_EQ(backend_family("redis-sentinel+tls://h/m"), "redis");
  EXPECT_EQ(backend_family("redlock+tls://a,b,c"), "redlock");
  EXPECT_EQ(backend_family("postgresql://h/db"), "postgres");
  EXPECT_EQ(backend_family("zk+tls://h"), "zookeeper");
  EXPECT_EQ(backend_family("sqlite:///tmp/x.db"), "sqlite");
  EXPECT_EQ(backend_family("redis-clusterx://h"), "");
  EXPECT_EQ(backend_family("etcd+tls://h"), "etcd");
  EXPECT_EQ(backend_family("consul://h"), "");
  EXPECT_EQ(backend_family("no scheme"), "");
}

// A backend with no replicas refuses wait_replicas, before any I/O (the
// servers named here do not exist).
TEST(BackendFamily, WaitReplicasIsRefusedWhereThereAreNoReplicasToWaitFor) {
  ClientOptions o;
  o.wait_replicas = 1;
  for (const char* url : {"sqlite:///nonexistent-dir/x.db", "postgres://127.0.0.1:1/db", "zk://127.0.0.1:1/locks",
                          "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"}) {
    bool served = false;
    for (const auto& s : detail::backend_schemes())
      served |= std::string(url).starts_with(std::string(s.scheme) + "://");
    if (!served) continue;
    try {
      (void)Client::connect(url, o);
      ADD_FAILURE() << url << " took wait_replicas";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << url << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("wait_replicas"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace dlock

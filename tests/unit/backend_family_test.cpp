// backend_family(): the one map of URL schemes to backend families, which
// ClientStats::backend and the dlock tool's advice read.
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
  EXPECT_EQ(backend_family("etcd://h"), "");
  EXPECT_EQ(backend_family("no scheme"), "");
}

}  // namespace
}  // namespace dlock

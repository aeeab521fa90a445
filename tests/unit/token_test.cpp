#include <gtest/gtest.h>

#include <set>

#include "core/token.hpp"

namespace dlock::detail {
namespace {

TEST(Token, HexOf128Bits) {
  std::string t = random_token();
  ASSERT_EQ(t.size(), 32u);
  for (char c : t) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << t;
}

TEST(Token, NoRepeatsInManyDraws) {
  std::set<std::string> seen;
  for (int i = 0; i < 10000; ++i) EXPECT_TRUE(seen.insert(random_token()).second);
  std::set<std::uint64_t> nums;
  for (int i = 0; i < 10000; ++i) nums.insert(random_u64());
  EXPECT_EQ(nums.size(), 10000u);
}

}  // namespace
}  // namespace dlock::detail

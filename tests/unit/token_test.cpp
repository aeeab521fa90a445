#include "core/token.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <set>

namespace dlock::detail {
namespace {

TEST(Token, Base64urlOf128Bits) {
  std::string t = random_token();
  ASSERT_EQ(t.size(), 22u);
  for (char c : t) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') << t;
  // The last character carries 2 random bits and 4 zero bits.
  std::set<char> last;
  for (int i = 0; i < 200; ++i) last.insert(random_token().back());
  EXPECT_EQ(last, (std::set<char>{'A', 'Q', 'g', 'w'}));
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

// The Lua scripts as compiled in from src/redis/lua/: whole (every
// `--@include` expanded), hashed, and their sharded forms publishing with
// SPUBLISH. Whether Redis runs them is for the integration tests.
#include <gtest/gtest.h>

#include <string>

#include "redis/line_scripts.hpp"
#include "redis/scripts.hpp"

namespace dlock::redis {
namespace {

const Script* const kAll[] = {&acquire_script(),      &release_script(),      &renew_script(),
                              &line_acquire_script(), &line_release_script(), &line_abandon_script(),
                              &line_inspect_script()};

TEST(RedisScripts, EveryScriptIsWholeAndHashed) {
  for (const Script* s : kAll) {
    EXPECT_EQ(s->body.find("--@include"), std::string_view::npos) << s->body.substr(0, 80);
    // Every script that may grant draws fences from the one counter helper.
    EXPECT_NE(s->body.find("local function L_fence("), std::string_view::npos) << s->body.substr(0, 80);
    EXPECT_EQ(s->sha1, script_sha1(s->body));
    EXPECT_EQ(s->sha1.size(), 40u);
  }
  // The line's helpers live inside line_settle where a plain script needs
  // them only sometimes, and at the top of the line scripts.
  EXPECT_NE(acquire_script().body.find("local function line_settle("), std::string_view::npos);
  EXPECT_NE(line_acquire_script().body.find("local function L_promote("), std::string_view::npos);
}

TEST(RedisScripts, TheShardedFormPublishesWithSpublish) {
  const Script& sharded = with_sharded_publish(release_script());
  EXPECT_NE(sharded.sha1, release_script().sha1);
  EXPECT_EQ(std::string(sharded.body).find("redis.call, 'publish'"), std::string::npos);
  EXPECT_NE(std::string(sharded.body).find("redis.call, 'spublish'"), std::string::npos);
  EXPECT_EQ(&with_sharded_publish(release_script()), &sharded);  // made once
}

}  // namespace
}  // namespace dlock::redis

#include "redis/resp.hpp"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include "redis/errors.hpp"

namespace dlock::redis {
namespace {

TEST(Resp, FormatsBinarySafeBulkStrings) {
  std::string out;
  append_command(out, {"SET", std::string_view("k\0y", 3), "v"});
  EXPECT_EQ(out, std::string("*3\r\n$3\r\nSET\r\n$3\r\nk\0y\r\n$1\r\nv\r\n", 29));
}

// The request form is written by hand: it must be byte for byte what
// hiredis's own formatter writes, for empty, binary, long and many arguments,
// and it appends (a pipeline's requests go into one buffer).
TEST(Resp, WritesWhatHiredisWrites) {
  std::vector<std::string> storage = {"", std::string("\0\r\n$*", 6), std::string(100000, 'x'), "EVALSHA"};
  for (int i = 0; i < 40; ++i) storage.push_back(std::to_string(i * 7919));
  std::vector<std::string_view> args(storage.begin(), storage.end());
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  char* cmd = nullptr;
  const int n = redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), argv.data(), lens.data());
  ASSERT_GT(n, 0);
  const std::string expected(cmd, static_cast<std::size_t>(n));
  redisFreeCommand(cmd);
  std::string out = "*1\r\n$4\r\nPING\r\n";
  append_command(out, args);
  EXPECT_EQ(out, "*1\r\n$4\r\nPING\r\n" + expected);
  std::string none;
  append_command(none, {});
  EXPECT_EQ(none, "*0\r\n");
}

TEST(Resp, ReadsRepliesSplitAcrossFeeds) {
  ReplyReader r;
  Status err;
  std::string wire = "*3\r\n:1\r\n$5\r\nhello\r\n$-1\r\n+OK\r\n-WRONGTYPE bad\r\n";
  r.feed(wire.data(), 7);
  EXPECT_FALSE(r.next(err).has_value());
  r.feed(wire.data() + 7, wire.size() - 7);
  auto a = r.next(err);
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->type, Reply::Type::array);
  ASSERT_EQ(a->elements.size(), 3u);
  EXPECT_EQ(a->elements[0].integer, 1);
  EXPECT_EQ(a->elements[1].str, "hello");
  EXPECT_TRUE(a->elements[2].is_nil());
  auto ok = r.next(err);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->type, Reply::Type::status);
  auto e = r.next(err);
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->is_error());
  EXPECT_TRUE(err.ok());
}

TEST(Resp, GarbageIsAProtocolError) {
  ReplyReader r;
  Status err;
  r.feed("?what\r\n", 7);
  EXPECT_FALSE(r.next(err).has_value());
  EXPECT_EQ(err.code(), Errc::protocol_error);
}

TEST(Resp, ErrorTranslationTable) {
  EXPECT_EQ(translate_error("WRONGTYPE Operation against a key holding the wrong kind of value").code(),
            Errc::wrong_type);
  EXPECT_EQ(translate_error("ERR Error running script (call to f_x): @user_script:2: WRONGTYPE Operation against "
                            "a key holding the wrong kind of value")
                .code(),
            Errc::wrong_type);
  EXPECT_EQ(translate_error("WRONGPASS invalid username-password pair or user is disabled.").code(), Errc::auth_failed);
  EXPECT_EQ(translate_error("NOAUTH Authentication required.").code(), Errc::auth_failed);
  EXPECT_EQ(translate_error("ERR AUTH <password> called without any password configured for the default user.").code(),
            Errc::auth_failed);
  EXPECT_EQ(translate_error("NOPERM this user has no permissions to run the 'evalsha' command").code(),
            Errc::permission_denied);
  EXPECT_EQ(translate_error("LOADING Redis is loading the dataset in memory").code(), Errc::unavailable);
  EXPECT_EQ(translate_error("READONLY You can't write against a read only replica.").code(), Errc::unavailable);
  EXPECT_EQ(translate_error("ERR unknown command").code(), Errc::server_error);
}

TEST(Resp, TheServersOwnCodeIsKeptForRetryPolicies) {
  EXPECT_EQ(
      translate_error("ERR Error running script (call to f_x): @user_script:2: WRONGTYPE Operation").backend_code(),
      "WRONGTYPE");
  EXPECT_EQ(translate_error("OOM command not allowed when used memory > 'maxmemory'.").backend_code(), "OOM");
  EXPECT_EQ(translate_error("NOPERM no permissions").backend_code(), "NOPERM");
  EXPECT_EQ(translate_error("ERR unknown command").backend_code(), "ERR");
  EXPECT_TRUE(Status(Errc::unavailable, "no reply").backend_code().empty());
}

}  // namespace
}  // namespace dlock::redis

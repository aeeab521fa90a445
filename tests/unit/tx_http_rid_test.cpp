// The request id that ties an HTTP participant's answer to its call: the
// coordinator appends rid=<16 hex> to each call's query, handle_http echoes
// it, and the coordinator takes an answer only when the echo matches.
#include <gtest/gtest.h>

#include <dlock/tx.hpp>
#include <string>

#include "tx/http_client.hpp"

namespace dlock::tx::detail {
namespace {

constexpr const char* kOurs = "0123456789abcdef";

TEST(EchoedRid, ATopLevelRidOfOurShapeIsRead) {
  EXPECT_EQ(echoed_rid(R"({"dtm_result":"SUCCESS","rid":"0123456789abcdef"})"), kOurs);
  EXPECT_EQ(echoed_rid(R"( { "rid" : "0123456789abcdef" , "dtm_result" : "FAILURE" } )"), kOurs);
}

TEST(EchoedRid, AThirdPartysRidIsNotOurs) {
  // Nested in an object or a list of its own.
  EXPECT_EQ(echoed_rid(R"({"dtm_result":"SUCCESS","order":{"rid":"ffffffffffffffff"}})"), std::nullopt);
  EXPECT_EQ(echoed_rid(R"({"items":[{"rid":"ffffffffffffffff"}],"dtm_result":"SUCCESS"})"), std::nullopt);
  // Another shape: not 16 lowercase hex digits.
  EXPECT_EQ(echoed_rid(R"({"dtm_result":"SUCCESS","rid":"order-17"})"), std::nullopt);
  EXPECT_EQ(echoed_rid(R"({"rid":"0123456789ABCDEF"})"), std::nullopt);
  EXPECT_EQ(echoed_rid(R"({"rid":42})"), std::nullopt);
  // "rid" as a value, or inside another string.
  EXPECT_EQ(echoed_rid(R"({"name":"rid","note":"\"rid\":\"0123456789abcdef\""})"), std::nullopt);
  // But ours is found after a nested one.
  EXPECT_EQ(echoed_rid(R"({"order":{"rid":"x"},"rid":"0123456789abcdef"})"), kOurs);
}

TEST(EchoedRid, NoneOrBrokenBodiesHaveNone) {
  EXPECT_EQ(echoed_rid(""), std::nullopt);
  EXPECT_EQ(echoed_rid("not json"), std::nullopt);
  EXPECT_EQ(echoed_rid(R"({"rid":"0123456789abc)"), std::nullopt);
  EXPECT_EQ(echoed_rid(R"({"dtm_result":"SUCCESS"})"), std::nullopt);
}

// A participant whose own URL carries a rid: the coordinator's, appended
// last, is the one echoed.
TEST(HandleHttp, EchoesTheLastRidOfTheQuery) {
  auto ok = [](const BranchContext&) { return Outcome::success; };
  const HttpReply r = handle_http("/tcc?rid=theirs&gid=g1&branch_id=1&op=try&rid=0123456789abcdef", "{}", ok);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(echoed_rid(r.body), kOurs) << r.body;
  const HttpReply none = handle_http("/tcc?gid=g1&branch_id=1&op=try", "{}", ok);
  EXPECT_EQ(echoed_rid(none.body), std::nullopt) << none.body;
}

}  // namespace
}  // namespace dlock::tx::detail

// Redis Cluster routing data without a server: the key hash, the slot map
// from a CLUSTER SLOTS reply, and redirect parsing.
#include "redis/cluster_map.hpp"

#include <gtest/gtest.h>

#include "redis/keys.hpp"

namespace dlock::redis {
namespace {

TEST(ClusterSlot, Crc16MatchesTheSpecsCheckValue) { EXPECT_EQ(crc16_xmodem("123456789"), 0x31C3); }

TEST(ClusterSlot, KeySlotFollowsTheHashTagRule) {
  EXPECT_EQ(key_slot("foo"), 12182);  // CLUSTER KEYSLOT foo on Redis 7
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
  EXPECT_EQ(key_slot("foo{}{bar}"), key_slot("foo{}{bar}"));  // empty tag: the whole key
  EXPECT_NE(key_slot("foo{}{bar}"), key_slot("bar"));
  EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));  // up to the first '}'
  EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
}

// Every key one lock touches must be in one slot, or a cluster refuses the
// script (CROSSSLOT): names with braces and '%' included. (An empty name,
// whose tag "{}" would not count, is refused before any key is built.)
TEST(ClusterSlot, EveryKeyOfALockSharesItsSlot) {
  for (std::string name : {"orders", "a{b}c", "}{", "{", "100%", "%7B", "x:f", " "}) {
    auto k = detail::lock_keys("dlock:", name, detail::FenceScope::name);
    const int slot = key_slot(k.lock);
    EXPECT_EQ(key_slot(k.fence), slot) << name;
    EXPECT_EQ(key_slot(k.channel), slot) << name;
    EXPECT_EQ(key_slot(k.line), slot) << name;
    EXPECT_EQ(key_slot(k.lock + ":t:owner/A"), slot) << name;
  }
}

Reply integer(long long v) {
  Reply r;
  r.type = Reply::Type::integer;
  r.integer = v;
  return r;
}
Reply string(std::string s) {
  Reply r;
  r.type = Reply::Type::string;
  r.str = std::move(s);
  return r;
}
Reply array(std::vector<Reply> e) {
  Reply r;
  r.type = Reply::Type::array;
  r.elements = std::move(e);
  return r;
}
Reply range(long long lo, long long hi, std::string host, long long port) {
  return array({integer(lo), integer(hi), array({string(std::move(host)), integer(port), string("id")}),
                array({string("127.0.0.1"), integer(port + 3), string("replica")})});
}

TEST(SlotMap, BuiltFromClusterSlots) {
  auto map = SlotMap::from_cluster_slots(
      array({range(0, 5460, "127.0.0.1", 7001), range(5461, 10922, "127.0.0.1", 7002), range(10923, 16383, "", 7003)}),
      "10.0.0.9");
  ASSERT_TRUE(map.ok()) << map.status().to_string();
  EXPECT_EQ(map->masters().size(), 3u);
  EXPECT_EQ(map->master_of(0)->port, 7001);
  EXPECT_EQ(map->master_of(5461)->port, 7002);
  EXPECT_EQ(map->master_of(16383)->address(), "10.0.0.9:7003");  // no host: the node asked
  EXPECT_EQ(map->unserved(), 0);
  EXPECT_EQ(map->master_of(-1), nullptr);
  EXPECT_EQ(map->master_of(16384), nullptr);
}

TEST(SlotMap, MovedUpdatesOneSlotAndKnowsANewNode) {
  auto map = SlotMap::from_cluster_slots(array({range(0, 16383, "127.0.0.1", 7001)}), "h");
  ASSERT_TRUE(map.ok());
  map->move(42, ClusterNode{"127.0.0.1", 7005});
  EXPECT_EQ(map->master_of(42)->port, 7005);
  EXPECT_EQ(map->master_of(41)->port, 7001);
  EXPECT_EQ(map->masters().size(), 2u);
  // A node whose last slot moved away is no master any more.
  auto two = SlotMap::from_cluster_slots(array({range(0, 0, "h", 1), range(1, 16383, "h", 2)}), "h");
  ASSERT_TRUE(two.ok());
  two->move(0, ClusterNode{"h", 2});
  ASSERT_EQ(two->masters().size(), 1u);
  EXPECT_EQ(two->masters()[0].port, 2);
  EXPECT_EQ(SlotMap().master_of(0), nullptr) << "an empty map serves nothing";
}

TEST(SlotMap, GapsAreUnservedAndBadRepliesRefused) {
  auto map = SlotMap::from_cluster_slots(array({range(0, 99, "127.0.0.1", 7001)}), "h");
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->unserved(), 16384 - 100);
  EXPECT_EQ(map->master_of(100), nullptr);
  EXPECT_EQ(SlotMap::from_cluster_slots(array({}), "h").code(), Errc::unavailable);
  EXPECT_EQ(SlotMap::from_cluster_slots(string("x"), "h").code(), Errc::protocol_error);
  EXPECT_EQ(SlotMap::from_cluster_slots(array({range(5, 20000, "h", 1)}), "h").code(), Errc::protocol_error);
  EXPECT_EQ(SlotMap::from_cluster_slots(array({range(0, 1, "h", 0)}), "h").code(), Errc::protocol_error);
  EXPECT_EQ(SlotMap::from_cluster_slots(array({array({integer(0), integer(1)})}), "h").code(), Errc::protocol_error);
}

TEST(Redirect, ParsesEveryKind) {
  auto moved = parse_redirect("MOVED 3999 127.0.0.1:6381");
  EXPECT_EQ(moved.kind, Redirect::Kind::moved);
  EXPECT_EQ(moved.slot, 3999);
  EXPECT_EQ(moved.node.address(), "127.0.0.1:6381");
  auto ask = parse_redirect("ASK 1 ::1:7000");
  EXPECT_EQ(ask.kind, Redirect::Kind::ask);
  EXPECT_EQ(ask.node.host, "::1");
  EXPECT_EQ(ask.node.address(), "[::1]:7000");
  auto hostless = parse_redirect("MOVED 7 :7000");
  EXPECT_EQ(hostless.kind, Redirect::Kind::moved);
  EXPECT_EQ(hostless.node.host, "");
  EXPECT_EQ(parse_redirect("TRYAGAIN Multiple keys request during rehashing of slot").kind, Redirect::Kind::tryagain);
  EXPECT_EQ(parse_redirect("CLUSTERDOWN The cluster is down").kind, Redirect::Kind::clusterdown);
  for (const char* other : {"ERR unknown", "MOVED", "MOVED x 1.2.3.4:5", "MOVED 16384 h:1", "MOVED 1 h:0",
                            "MOVED 1 h:99999", "ASKING", "MOVEDX 1 h:1", "MOVED 1 nohostport"})
    EXPECT_EQ(parse_redirect(other).kind, Redirect::Kind::none) << other;
}

TEST(ClusterKeys, PerNameFenceKeysAreHiddenFromNames) {
  auto k = detail::lock_keys("p:", "job", detail::FenceScope::name);
  EXPECT_EQ(k.fence, "p:{job}:f");
  EXPECT_EQ(detail::name_of_key("p:", k.fence), "");
  EXPECT_EQ(detail::name_of_key("p:", k.lock), "job");
  EXPECT_EQ(detail::lock_keys("p:", "job").fence, "p:fence");  // one server: unchanged
}

}  // namespace
}  // namespace dlock::redis

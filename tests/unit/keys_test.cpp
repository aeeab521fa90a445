#include "redis/keys.hpp"

#include <gtest/gtest.h>

#include "core/names.hpp"
#include "redis/cluster_map.hpp"

namespace dlock::detail {
namespace {

TEST(Keys, LockAndChannelShareOneHashTagFencesOneCounter) {
  auto k = lock_keys("dlock:", "orders:42");
  EXPECT_EQ(k.lock, "dlock:{orders:42}");
  EXPECT_EQ(k.channel, "dlock:{orders:42}:wake");
  EXPECT_EQ(k.fence, "dlock:fence");
  EXPECT_EQ(lock_keys("dlock:", "other").fence, k.fence) << "one counter per prefix: no key per name";
}

// The plain layout: the lock is the name itself (a peer library's key),
// dlock's side keys sit in the name's cluster slot whatever the name holds.
TEST(Keys, PlainLayoutLocksTheNameItselfAndKeepsItsSideKeysInItsSlot) {
  auto k = plain_keys("dlock:", "orders:42");
  EXPECT_EQ(k.lock, "orders:42");
  EXPECT_EQ(k.fence, "dlock:fence") << "one server: the counter the dlock layout uses too";
  EXPECT_TRUE(k.line.empty());
  for (std::string name : {"orders:42", "{user1}:lock", "a}b{", "{}x", "", "%7D", "\xff\x00"}) {
    for (FenceScope scope : {FenceScope::prefix, FenceScope::name}) {
      const LockKeys p = plain_keys("dlock:", name, scope);
      const int slot = redis::key_slot(name);
      EXPECT_EQ(p.lock, name);
      EXPECT_EQ(redis::key_slot(p.channel), slot) << name;
      EXPECT_EQ(redis::key_slot(p.tombstone + "owner/1"), slot) << name;
      if (scope == FenceScope::name) {
        EXPECT_EQ(redis::key_slot(p.fence), slot) << name;
        EXPECT_TRUE(p.fence.ends_with("}:f")) << "raised to the server clock, as lock_keys' per-name counter";
      }
      EXPECT_EQ(name_of_key("dlock:", p.channel), "") << "a side key is no dlock-layout lock";
    }
  }
  // A prefix with a hash tag of its own ("{dlock}:") must not pull the side
  // keys out of the name's slot.
  for (std::string layout : {"plain", "redisson"})
    for (std::string name : {"orders:42", "{user1}:lock"}) {
      const LockKeys p = layout == "plain" ? plain_keys("{dlock}:", name, FenceScope::name)
                                           : redisson_keys("{dlock}:", name, FenceScope::name);
      const int slot = redis::key_slot(name);
      EXPECT_EQ(redis::key_slot(p.fence), slot) << layout << " " << name << " " << p.fence;
      EXPECT_EQ(redis::key_slot(p.tombstone + "owner/1"), slot) << layout << " " << name;
      EXPECT_TRUE(own_key("{dlock}:", p.fence)) << p.fence;
      EXPECT_TRUE(own_key("{dlock}:", p.tombstone + "o/1")) << p.tombstone;
    }
  EXPECT_EQ(plain_keys("p:", "a").fence, "p:fence") << "a prefix without braces is used as it is";
  EXPECT_NE(plain_keys("p:", "a").channel, plain_keys("p:", "b").channel);
  EXPECT_EQ(plain_key_pattern("job*"), "job\\**");
}

// Every key dlock keeps for itself, in any layout and fence scope, is
// refused as the name of a single-key layout's lock (its hold would be
// written over the key); the names people use are not.
TEST(Keys, NoNameOfASingleKeyLayoutAliasesAKeyDlockKeeps) {
  for (std::string prefix : {"dlock:", "", "{dlock}:"}) {
    for (std::string name : {"orders:42", "{user1}:lock", "a}b{", "fence", "x:f"}) {
      for (FenceScope scope : {FenceScope::prefix, FenceScope::name}) {
        for (const LockKeys& k :
             {lock_keys(prefix, name, scope), plain_keys(prefix, name, scope), redisson_keys(prefix, name, scope)}) {
          EXPECT_TRUE(own_key(prefix, k.fence)) << prefix << " " << k.fence;
          EXPECT_TRUE(own_key(prefix, k.tombstone + "owner/1")) << prefix << " " << k.tombstone;
          if (!k.line.empty()) EXPECT_TRUE(own_key(prefix, k.line)) << k.line;
          if (!k.channel.starts_with("redisson_lock__channel:")) EXPECT_TRUE(own_key(prefix, k.channel)) << k.channel;
        }
        EXPECT_TRUE(own_key(prefix, lock_keys(prefix, name, scope).lock)) << prefix << " " << name;
      }
    }
  }
  EXPECT_TRUE(own_key("dlock:", "dlock:fence"));
  EXPECT_TRUE(own_key("", "fence"));
  for (std::string name : {"orders:42", "dlock:deploy", "{user1}:lock", "dlock:{x", "fence:1", "dlock:fences"})
    EXPECT_FALSE(own_key("dlock:", name)) << name;
  EXPECT_FALSE(own_key("", "{user1}:lock")) << "a hash-tagged name of one's own";
  EXPECT_FALSE(own_key("", "dlock:fence")) << "another prefix's counter is not this client's";
}

// Redisson's RLock: the hash at the name, its channel with the braces of
// Redisson's prefixName (none added to a name that has one), every key
// dlock adds in the name's slot.
TEST(Keys, RedissonKeysAreRedissonsAndInTheNamesSlot) {
  // Java Redisson braces a name without '{', node-redisson one not starting
  // with '{': where they differ, node-redisson's channel is kept too.
  EXPECT_EQ(redisson_keys("dlock:", "job{7}a").channel, "redisson_lock__channel:job{7}a");
  EXPECT_EQ(redisson_keys("dlock:", "job{7}a").peer_channel, "redisson_lock__channel:{job{7}a}");
  EXPECT_EQ(redisson_keys("dlock:", "{job}a").peer_channel, "") << "both leave it as it is";
  EXPECT_EQ(redisson_keys("dlock:", "job").peer_channel, "") << "both brace it";
  auto k = redisson_keys("dlock:", "orders:42");
  EXPECT_EQ(k.lock, "orders:42");
  EXPECT_EQ(k.channel, "redisson_lock__channel:{orders:42}");
  EXPECT_EQ(redisson_keys("dlock:", "{user1}:lock").channel, "redisson_lock__channel:{user1}:lock");
  EXPECT_EQ(k.fence, "dlock:fence");
  EXPECT_TRUE(k.line.empty());
  EXPECT_NE(k.tombstone, plain_keys("dlock:", "orders:42").tombstone) << "the layouts' side keys differ";
  // (Redisson's own channel leaves the name's slot for a name with a brace
  // but no hash tag, "{}x" or "a{", and for "": its rule, kept.)
  for (std::string name : {"orders:42", "{user1}:lock", "%7D", "\xff"}) {
    const LockKeys r = redisson_keys("dlock:", name, FenceScope::name);
    const int slot = redis::key_slot(name);
    EXPECT_EQ(redis::key_slot(r.channel), slot) << name;
    EXPECT_EQ(redis::key_slot(r.tombstone + "owner/1"), slot) << name;
    EXPECT_EQ(redis::key_slot(r.fence), slot) << name;
  }
}

TEST(Keys, EverySlotHasATag) {
  for (int slot = 0; slot < 16384; ++slot) {
    const std::string& tag = slot_tag(slot);
    ASSERT_FALSE(tag.empty());
    ASSERT_EQ(redis::key_slot("{" + tag + "}x"), slot);
  }
}

TEST(Keys, BracesCannotBreakTheTag) {
  auto k = lock_keys("p:", "a}b{c%");
  EXPECT_EQ(k.lock, "p:{a%7Db%7Bc%25}");
  // Distinct names never collide after escaping.
  EXPECT_NE(lock_keys("p:", "%7D").lock, lock_keys("p:", "}").lock);
}

// dlock list on Redis: a SCAN pattern takes the prefix literally, and every
// key of a lock names it back.
TEST(Keys, ListPatternsAreLiteralAndKeysNameTheirLock) {
  EXPECT_EQ(lock_key_pattern("dlock:", "job*"), "dlock:{job\\**");
  EXPECT_EQ(lock_key_pattern("p[1]:", "a{b"), "p\\[1\\]:{a%7Bb*");
  EXPECT_EQ(lock_key_pattern("p:", ""), "p:{*");
  for (std::string name : {"plain", "a}b{c%", "%7D", "x:q", "*?[]\\"}) {
    const LockKeys k = lock_keys("p:", name);
    EXPECT_EQ(name_of_key("p:", k.lock), name);
    EXPECT_EQ(name_of_key("p:", k.line), name);
    EXPECT_EQ(name_of_key("p:", k.lock + ":t:owner/1"), name);
  }
  EXPECT_EQ(name_of_key("p:", "p:fence"), "");
  EXPECT_EQ(name_of_key("p:", "q:{x}"), "");
  EXPECT_EQ(name_of_key("p:", "p:{unclosed"), "");
}

TEST(Keys, NameValidation) {
  EXPECT_EQ(validate_name("").code(), Errc::invalid_argument);
  EXPECT_EQ(validate_name(std::string(kMaxNameBytes + 1, 'x')).code(), Errc::invalid_argument);
  EXPECT_TRUE(validate_name(std::string(kMaxNameBytes, 'x')).ok());
  EXPECT_TRUE(validate_name("binary\0name").ok());
  EXPECT_EQ(validate_owner("").code(), Errc::invalid_argument);
  EXPECT_EQ(validate_owner(std::string(kMaxOwnerBytes + 1, 'o')).code(), Errc::invalid_argument);
}

}  // namespace
}  // namespace dlock::detail

// The ZooKeeper backend's pure parts: the zk:// URL and the lock queue's
// names and order.
#include <gtest/gtest.h>

#include "zookeeper/factory.hpp"
#include "zookeeper/held_nodes.hpp"
#include "zookeeper/leader_proof.hpp"
#include "zookeeper/lock_queue.hpp"

namespace dlock::zookeeper {
namespace {

TEST(ZooKeeperUrl, HostsChrootTimeoutAndCredentials) {
  auto c = parse_zk_url("zk://app:s%40cret@h1:2182,h2,[::1]:2183/apps/billing?session_timeout=1500ms&prefix=locks");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->hosts, "h1:2182,h2:2181,[::1]:2183");
  EXPECT_EQ(c->base, "/apps/billing/locks");
  EXPECT_EQ(c->session_timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(c->user, "app");
  EXPECT_EQ(c->password, "s@cret");
  EXPECT_EQ(c->describe.find("cret"), std::string::npos) << c->describe;
  auto plain = parse_zk_url("zk://localhost");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->hosts, "localhost:2181");
  EXPECT_EQ(plain->base, "/dlock");
  EXPECT_EQ(plain->session_timeout, std::chrono::seconds(10));
  EXPECT_TRUE(parse_zk_url("zk://h/?session_timeout=2s").ok());
  EXPECT_EQ(parse_zk_url("zk://h?session_timeout=1m")->session_timeout, std::chrono::minutes(1));
  EXPECT_EQ(parse_zk_url("zk://h?session_timeout=1h")->session_timeout, std::chrono::hours(1)) << "as the error says";
  EXPECT_FALSE(parse_zk_url("zk://h?session_timeout=61m").ok());
  EXPECT_EQ(plain->naming, Naming::curator);
  EXPECT_EQ(parse_zk_url("zk://h?layout=kazoo")->naming, Naming::kazoo);
  EXPECT_EQ(parse_zk_url("zk://h?layout=dlock")->naming, Naming::curator);
  auto bad = parse_zk_url("zk://h?layout=redisson");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::invalid_argument);
  EXPECT_NE(bad.status().message().find("kazoo"), std::string::npos) << bad.status().to_string();
}

TEST(ZooKeeperUrl, BadPartsAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"zookeeper://h", "expected zk://"},
      {"zk://", "missing host"},
      {"zk://h:0", "port"},
      {"zk://h:99999", "port"},
      {"zk://h,,g", "empty host"},
      {"zk://h/a//b", "chroot"},
      {"zk://h/a/..", "chroot"},
      {"zk://h?session_timeout=10", "session_timeout"},
      {"zk://h?session_timeout=0s", "session_timeout"},
      {"zk://h?session_timeout=-1s", "session_timeout"},
      {"zk://h?session_timeout=2h", "session_timeout"},
      {"zk://h?prefix=a/b", "prefix"},
      {"zk://h?colour=blue", "unknown parameter 'colour'"},
      {"zk://user@h", "user:password"},
      {"zk://:pw@h", "non-empty user"},
      {"zk+tls://h", "TLS"},
      {"zk://h?tls=1", "TLS"},
  };
  for (const auto& [url, needle] : cases) {
    auto c = parse_zk_url(url);
    ASSERT_FALSE(c.ok()) << url;
    EXPECT_EQ(c.status().code(), Errc::invalid_argument) << url;
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << url << ": " << c.status().message();
  }
}

// Three answered syncs j < i < k, i sent a third of the timeout after j's
// answer: k proves j's touch reached the leader (leader_proof.hpp).
TEST(ZooKeeperLeaderProof, ThirdSyncVouchesForTheFirstWhenTheMiddleOneIsLateEnough) {
  using namespace std::chrono_literals;
  const auto t0 = LeaderProof::Clock::time_point{} + 1h;
  LeaderProof proof(3000ms);
  EXPECT_EQ(proof.interval(), 500ms);
  EXPECT_FALSE(proof.answered(t0, t0 + 1ms));
  EXPECT_FALSE(proof.answered(t0 + 500ms, t0 + 501ms));
  EXPECT_FALSE(proof.answered(t0 + 1000ms, t0 + 1001ms)) << "the middle sync came too soon after the first";
  const auto p = proof.answered(t0 + 1500ms, t0 + 1501ms);  // middle at t0 + 1000 < t0 + 1 + 1000
  EXPECT_FALSE(p);
  const auto q = proof.answered(t0 + 2000ms, t0 + 2001ms);  // middle at t0 + 1500 >= t0 + 1 + 1000
  ASSERT_TRUE(q);
  EXPECT_EQ(*q, t0);
  const auto r = proof.answered(t0 + 2500ms, t0 + 2501ms);  // middle at t0 + 2000 >= t0 + 501 + 1000
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, t0 + 500ms);
  proof.reset();  // a new connection proves nothing yet
  EXPECT_FALSE(proof.answered(t0 + 3000ms, t0 + 3001ms));
  EXPECT_FALSE(proof.answered(t0 + 4500ms, t0 + 4501ms));
  EXPECT_EQ(proof.answered(t0 + 6000ms, t0 + 6001ms), t0 + 3000ms);
}

// A grant racing with the end of its session (clear(), then a new
// session) is refused, so the next session's proof cannot keep it alive.
TEST(ZooKeeperHeldNodes, OnlyTheCurrentSessionsHoldsAreKept) {
  HeldNodes held;
  held.set_session(7);
  EXPECT_TRUE(held.add(1, {"/dlock/a/n1", "a", "o", 7}));
  EXPECT_TRUE(held.clear());  // session 7 ended
  EXPECT_FALSE(held.add(2, {"/dlock/a/n2", "a", "o", 7})) << "a late grant of the ended session";
  held.set_session(8);
  EXPECT_FALSE(held.add(3, {"/dlock/a/n3", "a", "o", 7}));
  EXPECT_TRUE(held.empty());
  EXPECT_TRUE(held.add(4, {"/dlock/a/n4", "a", "o", 8}));
  // Its own release's deletion is no loss; another deletion is.
  EXPECT_FALSE(held.take_lost("/dlock/a/n9"));
  ASSERT_TRUE(held.start_release(4));
  EXPECT_FALSE(held.take_lost("/dlock/a/n4"));
  EXPECT_TRUE(held.add(5, {"/dlock/b/n5", "b", "o", 8}));
  auto lost = held.take_lost("/dlock/b/n5");
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->first, 5u);
  EXPECT_EQ(lost->second.name, "b");
}

TEST(ZooKeeperQueue, NamesBecomeOneSafeSegment) {
  EXPECT_EQ(encode_name("orders:42"), "orders:42");
  EXPECT_EQ(encode_name("a/b"), "a%2Fb");
  EXPECT_EQ(encode_name(".."), "%2E%2E");
  EXPECT_EQ(encode_name("café"), "caf%C3%A9");
  for (std::string n : {"a/b", "..", "x y%z", "café"}) EXPECT_EQ(decode_name(encode_name(n)), n);
}

TEST(ZooKeeperQueue, TheLowestSequenceHoldsAndEachWaiterWatchesTheOneAhead) {
  // Sequence order, not name order: guids sort differently.
  const auto ordered = in_order({"_c_zz-lock-0000000012", "_c_aa-lock-0000000010", "junk", "_c_mm-lock-0000000011"});
  ASSERT_EQ(ordered.size(), 3u);
  EXPECT_EQ(ordered[0], "_c_aa-lock-0000000010");
  EXPECT_EQ(ordered[2], "_c_zz-lock-0000000012");
  const Place head = place_of(ordered, "_c_aa-lock-0000000010");
  EXPECT_TRUE(head.present && head.first);
  const Place last = place_of(ordered, "_c_zz-lock-0000000012");
  EXPECT_TRUE(last.present);
  EXPECT_FALSE(last.first);
  EXPECT_EQ(last.predecessor, "_c_mm-lock-0000000011");
  EXPECT_EQ(last.ahead, 2u);
  EXPECT_FALSE(place_of(ordered, "_c_gone-lock-0000000009").present);
  EXPECT_EQ(sequence_of("x-lock-12345"), std::nullopt) << "not ten digits";
  EXPECT_EQ(sequence_of("_c_a-lock-2147483648"), 2147483648);
}

TEST(ZooKeeperQueue, ANodeIsFoundAgainByItsGuidOnly) {
  const std::vector<std::string> children = {"_c_abc-lock-0000000001", "_c_abcd-lock-0000000002"};
  EXPECT_EQ(find_by_guid(children, "abcd"), "_c_abcd-lock-0000000002");
  EXPECT_EQ(find_by_guid(children, "abc"), "_c_abc-lock-0000000001");
  EXPECT_EQ(find_by_guid(children, "ab"), std::nullopt);
  EXPECT_EQ(child_prefix("g"), "_c_g-lock-");
}

// One acquire can have made two nodes (a create whose answer was lost,
// listed on a server that had not applied it yet): both are found.
TEST(ZooKeeperQueue, EveryNodeOfAGuidIsFound) {
  const std::vector<std::string> children = {"_c_abc-lock-0000000001", "_c_abcd-lock-0000000002",
                                             "_c_abc-lock-0000000004", "_c_abc-sem3-0000000005"};
  EXPECT_EQ(nodes_of_guid(children, "abc"),
            (std::vector<std::string>{"_c_abc-lock-0000000001", "_c_abc-lock-0000000004", "_c_abc-sem3-0000000005"}));
  EXPECT_EQ(nodes_of_guid(children, "abcd"), std::vector<std::string>{"_c_abcd-lock-0000000002"});
  EXPECT_TRUE(nodes_of_guid(children, "ab").empty());
}

std::vector<std::string> names(const std::vector<std::string>& kinds) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    std::string seq = std::to_string(i + 1);
    out.push_back("_c_g" + std::to_string(i) + "-" + kinds[i] + "-" + std::string(10 - seq.size(), '0') + seq);
  }
  return out;
}

TEST(ZooKeeperLine, NamesTellTheModeAndPermits) {
  using detail::LockMode;
  EXPECT_EQ(child_prefix("g", LockMode::exclusive, 0), "_c_g-lock-");
  EXPECT_EQ(child_prefix("g", LockMode::shared, 0), "_c_g-read-");
  EXPECT_EQ(child_prefix("g", LockMode::shared, 3), "_c_g-sem3-");
  const auto sem = parse_child("_c_a-b-sem3-0000000007");
  ASSERT_TRUE(sem);
  EXPECT_EQ(sem->mode, LockMode::shared);
  EXPECT_EQ(sem->permits, 3u);
  EXPECT_EQ(sem->seq, 7);
  EXPECT_EQ(parse_child("_c_a-read-0000000001")->mode, LockMode::shared);
  EXPECT_EQ(parse_child("_c_a-read-0000000001")->permits, 0u);
  EXPECT_EQ(parse_child("_c_a-lock-0000000001")->mode, LockMode::exclusive);
  EXPECT_EQ(parse_child("_c_a-future-0000000001")->mode, LockMode::exclusive) << "unknown kinds count as writers";
  EXPECT_EQ(find_by_guid({"_c_ab-c-read-0000000001", "_c_ab-sem2-0000000002"}, "ab"), "_c_ab-sem2-0000000002");
  const auto d = parse_node_data(node_data(Naming::curator, "me", "candidate-7"));
  EXPECT_EQ(d.owner, "me");
  EXPECT_EQ(d.info, "candidate-7");
  EXPECT_EQ(parse_node_data("old-owner").owner, "old-owner") << "data without info (older clients)";
}

// kazoo's names (kazoo/recipe/lock.py: "<uuid hex>__lock__<seq>" for Lock
// and WriteLock, "__rlock__" for ReadLock) are read in every layout, and
// made in layout=kazoo, where the data is the holder alone (kazoo's
// identifier).
TEST(ZooKeeperLine, KazoosNamesAreReadAndMadeInItsLayout) {
  using detail::LockMode;
  EXPECT_EQ(child_prefix("g", LockMode::exclusive, 0, Naming::kazoo), "_c_g__lock__");
  EXPECT_EQ(child_prefix("g", LockMode::shared, 0, Naming::kazoo), "_c_g__rlock__");
  EXPECT_EQ(parse_child("6d1f0c3a9b8e4f27a1c2d3e4f5a6b7c8__lock__0000000003")->mode, LockMode::exclusive);
  const auto reader = parse_child("6d1f0c3a9b8e4f27a1c2d3e4f5a6b7c8__rlock__0000000004");
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->mode, LockMode::shared);
  EXPECT_EQ(reader->permits, 0u);
  EXPECT_EQ(reader->seq, 4);
  // A kazoo reader, a dlock reader in kazoo's names, a Curator writer: the
  // line is one, by sequence.
  const auto line = line_of({"_c_w-lock-0000000009", "_c_r__rlock__0000000008", "k__rlock__0000000007"});
  ASSERT_EQ(line.size(), 3u);
  EXPECT_EQ(granted_count(line), 2u) << "the two readers hold, the writer behind them waits";
  // Found again by the guid alone, in either naming; a guid that is a
  // prefix of another is not taken for it.
  const std::vector<std::string> children = {"_c_ab__lock__0000000001", "_c_ab___lock__0000000002",
                                             "_c_ab__rlock__0000000003", "_c_abc__lock__0000000004",
                                             "_c_ab-x__lock__0000000005"};
  EXPECT_EQ(nodes_of_guid(children, "ab"),
            (std::vector<std::string>{"_c_ab__lock__0000000001", "_c_ab__rlock__0000000003"}));
  EXPECT_EQ(nodes_of_guid(children, "ab_"), std::vector<std::string>{"_c_ab___lock__0000000002"});
  EXPECT_EQ(node_data(Naming::kazoo, "owner-token", "report-job"), "report-job");
  EXPECT_TRUE(kazoo_refusal(LockMode::exclusive, 0).ok());
  EXPECT_TRUE(kazoo_refusal(LockMode::shared, 0).ok());
  EXPECT_EQ(kazoo_refusal(LockMode::shared, 3).code(), Errc::invalid_argument);
  // Who holds, for inspect: dlock's info, or a peer's node and identifier.
  EXPECT_EQ(holder_of("_c_g__lock__0000000001", "report-job"), "report-job");
  EXPECT_EQ(holder_of("_c_g-lock-0000000001", node_data(Naming::curator, "o", "job[1]@h")), "job[1]@h");
  EXPECT_EQ(holder_of("ab__lock__0000000001", "batch\n7"),
            "a peer library (node ab__lock__0000000001, identifier 'batch?7')");
  EXPECT_EQ(holder_of("ab__lock__0000000001", ""), "a peer library (node ab__lock__0000000001)");
}

TEST(ZooKeeperLine, ReadersShareUntilAWriterAndQueueBehindAWaitingWriter) {
  const auto n = names({"read", "read", "lock", "read"});
  const auto line = line_of({n[3], n[1], n[0], n[2]});
  EXPECT_EQ(granted_count(line), 2u);
  EXPECT_TRUE(standing_of(line, n[1]).granted);
  const Standing writer = standing_of(line, n[2]);
  EXPECT_FALSE(writer.granted);
  EXPECT_EQ(writer.watch, std::vector<std::string>{n[1]}) << "a writer watches its predecessor";
  const Standing late = standing_of(line, n[3]);
  EXPECT_FALSE(late.granted) << "a reader behind a waiting writer waits";
  EXPECT_EQ(late.watch, std::vector<std::string>{n[2]}) << "a reader watches the nearest writer ahead";
  const auto w = names({"lock", "read", "read", "lock", "read"});
  EXPECT_EQ(standing_of(line_of(w), w[4]).watch, std::vector<std::string>{w[3]});
  EXPECT_EQ(granted_count(line_of(w)), 1u);
}

TEST(ZooKeeperLine, PermitsAdmitNAndAWaiterWatchesTheNAhead) {
  const auto n = names({"sem2", "sem2", "sem2", "sem2"});
  const auto line = line_of(n);
  EXPECT_EQ(granted_count(line), 2u);
  const Standing third = standing_of(line, n[2]);
  EXPECT_FALSE(third.granted);
  EXPECT_EQ(third.watch, (std::vector<std::string>{n[0], n[1]})) << "either holder's release lets it in";
  EXPECT_EQ(standing_of(line, n[3]).watch, (std::vector<std::string>{n[1], n[2]}));
  const auto big = names({"sem20", "sem20"});
  EXPECT_TRUE(standing_of(line_of(big), big[1]).granted);
  std::vector<std::string> kinds(21, "sem20");
  const auto full = names(kinds);
  const Standing last = standing_of(line_of(full), full[20]);
  EXPECT_FALSE(last.granted);
  EXPECT_TRUE(last.watch_children) << "more permits than it watches nodes for";
}

TEST(ZooKeeperLine, ADisagreeingCountIsTheLatecomers) {
  const auto n = names({"sem3", "read", "sem3"});
  const auto line = line_of(n);
  EXPECT_FALSE(standing_of(line, n[0]).disagrees);
  EXPECT_EQ(standing_of(line, n[1]).disagrees, 3u);
  EXPECT_EQ(standing_of(line, n[2]).disagrees, 0u) << "the reader ahead is still there";
  const auto w = names({"lock", "sem3"});
  EXPECT_FALSE(standing_of(line_of(w), w[1]).disagrees) << "writers carry no count";
}

}  // namespace
}  // namespace dlock::zookeeper

// Renewal: the watchdog keeps a lock past its lease; a fixed lease expires.
#include "integration/common.hpp"

namespace dlock::test {
namespace {

TEST(Watchdog, KeepsTheLockWellPastItsLease) {
  RedisServer server;
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  auto lease = client.try_acquire("wd", fast_watchdog(1000ms, 300ms)).value();
  auto first_valid = lease.valid_until();
  std::this_thread::sleep_for(2500ms);  // 2.5 leases
  auto info = client.inspect("wd").value();
  EXPECT_TRUE(info.held);
  EXPECT_GT(info.remaining.count(), 300);
  EXPECT_FALSE(lease.lost());
  EXPECT_GT(lease.valid_until(), first_valid) << "validity moves forward with each renewal";
  EXPECT_EQ(client.try_acquire("wd").code(), Errc::busy);
  EXPECT_GE(client.stats().renewal_round_trips, 6u);
  EXPECT_TRUE(lease.release().ok());
}

TEST(Watchdog, AnExplicitLeaseExpiresOnTimeAndIsNotRenewed) {
  RedisServer server;
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  LockOptions o;
  o.lease = 400ms;
  auto lease = client.try_acquire("fixed", o).value();
  auto pttl = client.inspect("fixed").value().remaining;
  EXPECT_LE(pttl.count(), 400);
  EXPECT_GT(pttl.count(), 200);
  EXPECT_EQ(client.try_acquire("fixed").code(), Errc::busy);
  auto t0 = Clock::now();
  auto other = client.acquire("fixed", 5s);  // waits for the expiry
  ASSERT_TRUE(other.ok());
  EXPECT_LT(ms_since(t0), 1500);
  EXPECT_EQ(client.stats().renewal_round_trips, 0u);
  EXPECT_TRUE(eventually([&] { return lease.lost(); }, 1s)) << "the fixed lease's end is signalled";
}

TEST(Watchdog, RenewsAllLeasesOfAClientInOneRoundTripPerTick) {
  RedisServer server;
  LogSink log;
  auto client = Client::connect(server.url(), quiet(log));
  constexpr int kLeases = 200;
  std::vector<Lease> leases;
  for (int i = 0; i < kLeases; ++i)
    leases.push_back(client.try_acquire("batch:" + std::to_string(i), fast_watchdog(1500ms, 500ms)).value());
  auto before = client.stats().renewal_round_trips;
  std::this_thread::sleep_for(1600ms);  // ~3 renewal periods
  auto trips = client.stats().renewal_round_trips - before;
  measure("renewal_round_trips_200_leases_3_periods", static_cast<long long>(trips), "");
  EXPECT_GE(trips, 2u);
  EXPECT_LE(trips, 8u) << "renewals must be batched, not one round trip per lock";
  for (int i = 0; i < kLeases; i += 37) EXPECT_TRUE(client.inspect("batch:" + std::to_string(i)).value().held);
}

}  // namespace
}  // namespace dlock::test

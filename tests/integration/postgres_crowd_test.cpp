// A crowd on one PostgreSQL name (a plain lock): a release wakes the first
// queued waiter alone, on its client's own channel, and keeps the free row
// for it a moment; a woken waiter that gives up, never comes or is gone
// passes its turn on. The table's channel is listened to only by clients
// with a line waiter or an observer.
#include <future>

#include "integration/common.hpp"
#include "support/postgres_server.hpp"

namespace dlock::test {
namespace {

int count_of(const PostgresServer& pg, const std::string& sql) {
  const std::string out = pg.psql(sql);
  return out.empty() ? -1 : std::atoi(out.c_str());
}

int queued(const PostgresServer& pg, const std::string& name) {
  return count_of(pg, "SELECT count(*) FROM public.dlock_locks_waiters WHERE name = '" + name + "'");
}

// Backends listening to the table's channel (every client did).
int table_listeners(const PostgresServer& pg) {
  return count_of(pg, "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN dlock_locks_released'");
}

// A woken waiter that never comes (its client listens but does not act):
// the one behind it, told to stand by, takes the lock once the row's
// reservation ends.
TEST(PostgresCrowd, AWokenWaiterThatNeverComesPassesItsTurnAfterTheReservation) {
  PostgresServer pg;
  LogSink log;
  Client holder = Client::connect(pg.url(), quiet(log));
  Client waiter = Client::connect(pg.url(), quiet(log));
  auto lease = holder.try_acquire("p").value();
  // First in the queue: a member whose client never answers.
  pg.psql("INSERT INTO public.dlock_locks_waiters VALUES ('p', '00000000deadbeef:1', 0, now() + interval '1 hour')");
  pg.psql("UPDATE public.dlock_locks SET waiters = true WHERE name = 'p'");
  std::promise<Result<Lease>> got;
  auto got_f = got.get_future();
  waiter.async_acquire("p", 20s, {}, [&](Result<Lease> x) { got.set_value(std::move(x)); });
  ASSERT_TRUE(eventually([&] { return queued(pg, "p") == 2; }, 10s));
  std::this_thread::sleep_for(100ms);
  const auto t0 = Clock::now();
  ASSERT_TRUE(lease.release().ok());
  ASSERT_EQ(got_f.wait_for(5s), std::future_status::ready);
  auto x = got_f.get();
  ASSERT_TRUE(x.ok()) << x.status().to_string();
  EXPECT_LT(ms_since(t0), 3000) << "granted at the reservation's end, not the holder's lease";
  EXPECT_EQ(queued(pg, "p"), 0);
}

// A waiter that gives up leaves the queue; one woken after its call ended
// passes the turn on at once.
TEST(PostgresCrowd, AWaiterThatGivesUpLeavesTheQueue) {
  PostgresServer pg;
  LogSink log;
  Client holder = Client::connect(pg.url(), quiet(log));
  Client quitter = Client::connect(pg.url(), quiet(log));
  Client waiter = Client::connect(pg.url(), quiet(log));
  auto lease = holder.try_acquire("q").value();
  Mutex mq(quitter, "q");
  std::thread quits([&] { EXPECT_FALSE(mq.try_lock_for(400ms)); });
  ASSERT_TRUE(eventually([&] { return queued(pg, "q") == 1; }, 10s));
  std::promise<Result<Lease>> got;
  auto got_f = got.get_future();
  waiter.async_acquire("q", 20s, {}, [&](Result<Lease> x) { got.set_value(std::move(x)); });
  quits.join();
  ASSERT_TRUE(eventually([&] { return queued(pg, "q") == 1; }, 10s)) << "the quitter left, the waiter stays";
  EXPECT_EQ(table_listeners(pg), 0) << "a plain waiter need not hear every release of the table";
  ASSERT_TRUE(lease.release().ok());
  ASSERT_EQ(got_f.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(got_f.get().ok());
}

// A line's waiter (a fair lock) still hears its hand-over: the table's
// channel is listened to while it waits, and no longer after.
TEST(PostgresCrowd, ALinesWaiterListensToTheTableWhileItWaits) {
  PostgresServer pg;
  LogSink log;
  Client holder = Client::connect(pg.url(), quiet(log));
  Client waiter = Client::connect(pg.url(), quiet(log));
  LockOptions fair;
  fair.fair = true;
  auto lease = holder.try_acquire("f", fair).value();
  std::promise<Result<Lease>> got;
  auto got_f = got.get_future();
  waiter.async_acquire("f", 20s, fair, [&](Result<Lease> x) { got.set_value(std::move(x)); });
  ASSERT_TRUE(eventually([&] { return table_listeners(pg) == 1; }, 10s));
  const auto t0 = Clock::now();
  ASSERT_TRUE(lease.release().ok());
  ASSERT_EQ(got_f.wait_for(5s), std::future_status::ready);
  auto x = got_f.get();
  ASSERT_TRUE(x.ok()) << x.status().to_string();
  EXPECT_LT(ms_since(t0), 3000) << "handed over, not found at the lease's end";
  EXPECT_TRUE(eventually([&] { return table_listeners(pg) == 0; }, 10s)) << "still listening to every release";
}

// A waiter whose LISTEN connection is cut (its backend terminated, as an
// operator or a pooler would) and whose turn comes while it is not
// listening: the NOTIFY reaches nobody, but the row is kept for it, and
// once it listens again it looks once and takes it. Not the holder's lease.
TEST(PostgresCrowd, AWaiterWhoseListenConnectionIsCutStillGetsItsTurn) {
  PostgresServer pg;
  LogSink log;
  Client holder = Client::connect(pg.url(), quiet(log));
  Client waiter = Client::connect(pg.url(), quiet(log));
  auto lease = holder.try_acquire("cut").value();
  std::promise<Result<Lease>> got;
  auto got_f = got.get_future();
  waiter.async_acquire("cut", 30s, {}, [&](Result<Lease> x) { got.set_value(std::move(x)); });
  ASSERT_TRUE(eventually([&] { return queued(pg, "cut") == 1; }, 10s));
  pg.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN dlockw_%'");
  const auto t0 = Clock::now();
  ASSERT_TRUE(lease.release().ok());  // while nobody listens
  ASSERT_EQ(got_f.wait_for(10s), std::future_status::ready);
  auto x = got_f.get();
  ASSERT_TRUE(x.ok()) << x.status().to_string();
  EXPECT_LT(ms_since(t0), 5000) << "found again when it listened again, not at the holder's lease";
  EXPECT_EQ(queued(pg, "cut"), 0);
}

}  // namespace
}  // namespace dlock::test

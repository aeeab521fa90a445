// A crowd on one PostgreSQL name (a plain lock): a release wakes the first
// queued waiter alone, on its client's own channel, and keeps the free row
// for it a moment; a woken waiter that gives up, never comes or is gone
// passes its turn on. A line's hand-over is told to its recipient's
// client; the table's channel is listened to only by observers. The
// clients of a process share one LISTEN connection.
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

// A line's waiter (a fair lock) is told of its hand-over on its own
// client's channel (schema 7): nobody LISTENs to the table's channel for
// it, so a line's hand-overs no longer reach every client of the table.
// Without the message it would look again only at a third of its lease.
TEST(PostgresCrowd, ALinesHandOverIsToldToItsRecipientsClientAlone) {
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
  ASSERT_TRUE(eventually(
      [&] { return count_of(pg, "SELECT count(*) FROM public.dlock_locks_line WHERE NOT holder") == 1; }, 10s));
  std::this_thread::sleep_for(200ms);  // its watch in place
  EXPECT_EQ(table_listeners(pg), 0) << "a line's waiter need not hear every hand-over of the table";
  EXPECT_EQ(count_of(pg, "SELECT count(*) FROM public.dlock_locks_line WHERE client IS NOT NULL"), 1);
  const auto t0 = Clock::now();
  ASSERT_TRUE(lease.release().ok());
  ASSERT_EQ(got_f.wait_for(5s), std::future_status::ready);
  auto x = got_f.get();
  ASSERT_TRUE(x.ok()) << x.status().to_string();
  EXPECT_LT(ms_since(t0), 3000) << "handed over, not found at its next look";
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

// The clients of one process LISTEN through one connection: a NOTIFY
// signals one server backend per process, not one per waiting client. A
// client that closes takes only its own channel with it, and a cut of the
// shared connection is healed for every client.
TEST(PostgresCrowd, TheClientsOfAProcessShareOneListenConnection) {
  PostgresServer pg;
  LogSink log;
  constexpr int kWaiters = 5;
  auto listeners = [&] {
    return count_of(pg, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' OR query LIKE 'UNLISTEN %'");
  };
  Client holder = Client::connect(pg.url(), quiet(log));
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kWaiters; ++i) clients.push_back(std::make_unique<Client>(Client::connect(pg.url(), quiet(log))));
  // Each waiter takes the lock in turn and gives it on at once.
  auto wait_all = [&](const std::string& name) {
    std::vector<std::future<Status>> got;
    for (std::size_t i = 0; i < clients.size(); ++i)
      got.push_back(std::async(std::launch::async, [&, name, i] {
        auto l = clients[i]->acquire(name, 20s);
        return l.ok() ? l->release() : l.status();
      }));
    EXPECT_TRUE(eventually([&] { return queued(pg, name) >= kWaiters; }, 10s));
    return got;
  };
  auto finish = [&](Lease lease, std::vector<std::future<Status>> got) {
    const auto t0 = Clock::now();
    ASSERT_TRUE(lease.release().ok());
    for (auto& f : got) {
      ASSERT_EQ(f.wait_for(15s), std::future_status::ready);
      const Status s = f.get();
      EXPECT_TRUE(s.ok()) << s.to_string();
    }
    EXPECT_LT(ms_since(t0), 10000) << "woken, not found at a lease";
  };

  // One more waits, and its client closes while the others wait.
  auto leaving = std::make_unique<Client>(Client::connect(pg.url(), quiet(log)));
  Lease lease = holder.try_acquire("shared").value();
  std::promise<Status> left;
  leaving->async_acquire("shared", 20s, {}, [&](Result<Lease> l) { left.set_value(l.status()); });
  auto got = wait_all("shared");
  ASSERT_TRUE(eventually([&] { return queued(pg, "shared") == kWaiters + 1; }, 10s));
  EXPECT_EQ(listeners(), 1) << "one LISTEN connection for the process";
  leaving.reset();
  EXPECT_EQ(left.get_future().get().code(), Errc::cancelled);
  EXPECT_EQ(queued(pg, "shared"), kWaiters) << "its waiter left";
  finish(std::move(lease), std::move(got));

  pg.psql(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' OR query LIKE 'UNLISTEN %'");
  Lease again = holder.try_acquire("again").value();
  auto got_again = wait_all("again");
  finish(std::move(again), std::move(got_again));
  EXPECT_EQ(listeners(), 1);
}

// Clients come and go on many threads while releases are announced: the
// shared LISTEN connection is made and dropped with them, and a client
// that closes mid-wait or as its turn arrives hears nothing after it.
TEST(PostgresCrowd, ClientsComingAndGoingShareTheListenConnectionSafely) {
  PostgresServer pg;
  LogSink log;
  std::atomic<int> granted{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 8; ++i) {
        Client c = Client::connect(pg.url(), quiet(log));
        auto l = c.acquire("churn", std::chrono::milliseconds(1 + (t * 7 + i * 3) % 40));
        if (l.ok()) {
          ++granted;
          if (i % 2) {
            EXPECT_TRUE(l->release().ok());
          }  // else dropped with its client
        } else if (l.status().code() != Errc::timeout) {
          ++other;
          ADD_FAILURE() << l.status().to_string();
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_GT(granted.load(), 0);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(queued(pg, "churn"), 0) << "every waiter left; left behind:\n"
                                    << pg.psql(
                                           "SELECT member, ticket, expires_at - now() FROM public.dlock_locks_waiters");
}

}  // namespace
}  // namespace dlock::test

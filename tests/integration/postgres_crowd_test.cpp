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

std::uint64_t wakeups(const std::vector<std::unique_ptr<Client>>& clients) {
  std::uint64_t n = 0;
  for (const auto& c : clients) n += c->stats().wakeups;
  return n;
}

std::uint64_t attempts(const std::vector<std::unique_ptr<Client>>& clients) {
  std::uint64_t n = 0;
  for (const auto& c : clients) n += c->stats().busy_answers + c->stats().grants;
  return n;
}

TEST(PostgresCrowd, AReleaseWakesOneWaiterAndTheOthersSleep) {
  PostgresServer pg;
  LogSink log;
  Client holder = Client::connect(pg.url(), quiet(log));
  auto lease = holder.try_acquire("c").value();
  constexpr int kWaiters = 12;
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::future<Result<Lease>>> got;
  for (int i = 0; i < kWaiters; ++i) {
    clients.push_back(std::make_unique<Client>(Client::connect(pg.url(), quiet(log))));
    auto p = std::make_shared<std::promise<Result<Lease>>>();
    got.push_back(p->get_future());
    clients.back()->async_acquire("c", 60s, {}, [p](Result<Lease> r) { p->set_value(std::move(r)); });
  }
  ASSERT_TRUE(eventually([&] { return queued(pg, "c") == kWaiters; }, 10s)) << "every waiter queued";
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(table_listeners(pg), 0) << "plain waiters need not hear every release of the table";
  const auto wakes_before = wakeups(clients), attempts_before = attempts(clients);

  ASSERT_TRUE(lease.release().ok());
  int granted = -1;
  ASSERT_TRUE(eventually(
      [&] {
        for (int i = 0; i < kWaiters; ++i)
          if (got[i].valid() && got[i].wait_for(0s) == std::future_status::ready) granted = i;
        return granted >= 0;
      },
      5s))
      << "the release reached a waiter";
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(wakeups(clients) - wakes_before, 1u) << "one waiter woken, not the crowd";
  EXPECT_LE(attempts(clients) - attempts_before, 2u) << "the others sent nothing";
  EXPECT_EQ(queued(pg, "c"), kWaiters - 1);
  auto next = got[granted].get();
  ASSERT_TRUE(next.ok()) << next.status().to_string();
  ASSERT_TRUE(next->release().ok());
  EXPECT_TRUE(eventually(
      [&] {
        int ready = 0;
        for (auto& f : got) ready += f.valid() && f.wait_for(0s) == std::future_status::ready;
        return ready == 1;
      },
      5s))
      << "the next release reached the next waiter";
}

// The releaser, looping, calls again at once: the row is kept for the
// waiter its release woke.
TEST(PostgresCrowd, TheReleasersNextCallDoesNotPassTheWokenWaiter) {
  PostgresServer pg;
  LogSink log;
  Client a = Client::connect(pg.url(), quiet(log));
  Client b = Client::connect(pg.url(), quiet(log));
  Mutex ma(a, "loop"), mb(b, "loop");
  ma.lock();
  std::promise<void> b_got;
  std::thread waiter([&] {
    mb.lock();
    b_got.set_value();
    mb.unlock();
  });
  ASSERT_TRUE(eventually([&] { return queued(pg, "loop") == 1; }, 10s));
  std::this_thread::sleep_for(100ms);
  ma.unlock();
  const bool barged = ma.try_lock();
  if (barged) ma.unlock();
  EXPECT_FALSE(barged) << "the releaser took it again before the waiter it woke";
  EXPECT_EQ(b_got.get_future().wait_for(5s), std::future_status::ready);
  waiter.join();
}

TEST(PostgresCrowd, ClientsLoopingOnOneNameAllGetTurns) {
  PostgresServer pg;
  LogSink log;
  constexpr int kClients = 8;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(std::make_unique<Client>(Client::connect(pg.url(), quiet(log))));
  std::vector<int> turns(kClients, 0);
  std::atomic<bool> stop{false};
  std::atomic<int> inside{0}, overlaps{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      Mutex m(*clients[i], "turns");
      while (!stop.load()) {
        if (!m.try_lock_for(5s)) continue;
        if (inside.fetch_add(1) != 0) ++overlaps;
        std::this_thread::sleep_for(5ms);
        inside.fetch_sub(1);
        ++turns[i];
        m.unlock();
      }
    });
  }
  std::this_thread::sleep_for(3s);
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  const int least = *std::min_element(turns.begin(), turns.end());
  const int most = *std::max_element(turns.begin(), turns.end());
  EXPECT_GE(least, 5) << "a client starved";
  EXPECT_LE(most, 4 * least + 4) << "turns far from even";
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

}  // namespace
}  // namespace dlock::test

// A crowd on one SQLite name (a plain lock): a release wakes the first
// queued waiter alone, through its client's FIFO beside the file
// (sqlite/wake_fifo.hpp), and keeps the free row for it a moment; a woken
// waiter that gives up, never comes or is gone passes its turn on. The
// wake-one, no-barging and turns checks are in the crowd contract.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>

#include "integration/common.hpp"
#include "integration/sqlite_poke.hpp"
#include "sqlite/host.hpp"
#include "sqlite/lock_store.hpp"
#include "support/temp_dir.hpp"

namespace dlock::test {
namespace {

constexpr const char* kSilentId = "00000000deadbeef";

Client open_client(const std::string& path, LogSink& log) { return Client::connect("sqlite://" + path, quiet(log)); }

long long queued(const std::string& path, const std::string& name) {
  return query_number(path, "SELECT count(*) FROM dlock_waiters WHERE name = '" + name + "'");
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// First in the name's queue: a member of client kSilentId, of this (live)
// process, attempt 1.
void queue_silent_member(const std::string& path, const std::string& name) {
  const sqlite::ProcessId& me = sqlite::self();
  poke(path, "INSERT INTO dlock_waiters VALUES ('" + name + "', 0, '" + kSilentId + ":1', " +
                 std::to_string(sqlite::boot_ms() + 3600000) + ", '" + sqlite::boot_id() + "', " +
                 std::to_string(me.pid) + ", " + std::to_string(me.start) + ", '" + me.ns + "')");
  poke(path, "UPDATE dlock_locks SET waiters = 1 WHERE name = '" + name + "'");
}

// A client that lives (its FIFO is read: held open) but never acts.
struct SilentClient {
  std::string path;
  int fd = -1;
  explicit SilentClient(const std::string& db) : path(db + "-waiters/" + kSilentId) {
    ::mkfifo(path.c_str(), 0600);
    fd = ::open(path.c_str(), O_RDWR | O_NONBLOCK);
  }
  ~SilentClient() {
    ::close(fd);
    ::unlink(path.c_str());
  }
  std::string read_all() const {
    char buf[512];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }
};

struct Waiting {
  std::promise<Result<Lease>> promise;
  std::future<Result<Lease>> future = promise.get_future();
  void start(Client& c, const std::string& name, milliseconds wait) {
    c.async_acquire(name, wait, {}, [this](Result<Lease> r) { promise.set_value(std::move(r)); });
  }
};

// A holder of "p", a queued member of client kSilentId first in line
// (`before_queue` runs before it is queued), and a real waiter behind it:
// how long after the release the waiter is granted (ms; -1: not granted).
long grant_after_release(
    const std::string& path, const std::function<void()>& before_queue = [] {}) {
  LogSink log;
  Client holder = open_client(path, log);
  Client waiter = open_client(path, log);
  auto lease = holder.try_acquire("p").value();
  before_queue();
  queue_silent_member(path, "p");
  Waiting w;
  w.start(waiter, "p", 20s);
  if (!eventually([&] { return queued(path, "p") == 2; }, 10s)) return -1;
  const auto t0 = Clock::now();
  if (!lease.release().ok() || w.future.wait_for(5s) != std::future_status::ready) return -1;
  auto got = w.future.get();
  EXPECT_TRUE(got.ok()) << got.status().to_string();
  return got.ok() ? ms_since(t0) : -1;
}

TEST(SqliteCrowd, AWokenWaiterThatNeverComesPassesItsTurnAfterTheReservation) {
  TempDir dir;
  const std::string path = dir.file("locks.db");
  std::unique_ptr<SilentClient> silent;
  const long took = grant_after_release(path, [&] { silent = std::make_unique<SilentClient>(path); });
  ASSERT_GE(silent->fd, 0);
  EXPECT_GE(took, 400) << "the row was kept for the woken one";
  EXPECT_LT(took, 3000) << "granted at the reservation's end, not the holder's lease";
  EXPECT_EQ(silent->read_all(), "w1:p\n") << "the turn went to the first waiter's own FIFO";
  EXPECT_EQ(queued(path, "p"), 0);
}

// A queued waiter whose client is gone: no FIFO at all, or one nobody
// reads (left by a client killed). The release skips it at once, and
// removes the FIFO.
TEST(SqliteCrowd, AQueuedWaiterWhoseClientIsGoneIsSkipped) {
  for (const bool fifo_left : {false, true}) {
    SCOPED_TRACE(fifo_left ? "its FIFO left behind" : "no FIFO");
    TempDir dir;
    const std::string path = dir.file("locks.db");
    const std::string fifo = path + "-waiters/" + kSilentId;
    const long took = grant_after_release(path, [&] {
      if (fifo_left) {
        EXPECT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
      }
    });
    EXPECT_GE(took, 0);
    EXPECT_LT(took, 350) << "not kept for a waiter nobody can wake";
    EXPECT_FALSE(exists(fifo));
  }
}

// A door replaced by something else (a regular file, a link to one): a
// release writes nothing into it, and takes its waiter for gone.
TEST(SqliteCrowd, ADoorThatIsNotAFifoIsNeverWrittenTo) {
  for (const bool link : {false, true}) {
    SCOPED_TRACE(link ? "a symbolic link to a file" : "a regular file");
    TempDir dir;
    const std::string path = dir.file("locks.db");
    const std::string door = path + "-waiters/" + kSilentId, target = dir.file("victim");
    { std::ofstream(target) << "keep"; }
    const long took = grant_after_release(path, [&] {
      if (link) {
        EXPECT_EQ(::symlink(target.c_str(), door.c_str()), 0);
      } else {
        EXPECT_EQ(::link(target.c_str(), door.c_str()), 0);
      }
    });
    EXPECT_GE(took, 0);
    EXPECT_LT(took, 350) << "not kept for a waiter nobody can wake";
    std::ifstream in(target);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, "keep") << "a release wrote into what is not a door";
  }
}

// A waiter that gives up leaves the queue; one woken as its call ends
// passes the turn on: the waiter behind it is granted long before the
// reservation would end. Released around the quitter's deadline, round
// after round.
TEST(SqliteCrowd, AWaiterThatGivesUpAsItIsWokenPassesTheTurnOn) {
  TempDir dir;
  const std::string path = dir.file("locks.db");
  LogSink log;
  Client holder = open_client(path, log);
  Client quitter = open_client(path, log);
  Client patient = open_client(path, log);
  long slowest = 0;
  for (int round = 0; round < 12; ++round) {
    auto lease = holder.try_acquire("q").value();
    constexpr auto kWait = 150ms;
    const auto q_start = Clock::now();
    Waiting q, p;
    q.start(quitter, "q", kWait);
    ASSERT_TRUE(eventually([&] { return queued(path, "q") == 1; }, 5s));
    p.start(patient, "q", 20s);
    ASSERT_TRUE(eventually([&] { return queued(path, "q") == 2; }, 5s));
    std::this_thread::sleep_until(q_start + kWait - 4ms + milliseconds(round % 4 * 3));
    const auto t0 = Clock::now();
    ASSERT_TRUE(lease.release().ok());
    auto qr = q.future.get();
    if (qr.ok()) {
      ASSERT_TRUE(qr->release().ok());
    }
    ASSERT_EQ(p.future.wait_for(5s), std::future_status::ready);
    auto pr = p.future.get();
    ASSERT_TRUE(pr.ok()) << pr.status().to_string();
    slowest = std::max<long>(slowest, ms_since(t0));
    ASSERT_TRUE(pr->release().ok());
  }
  EXPECT_LT(slowest, 450) << "a turn that found its waiter gone was passed on, not left to the reservation";
  EXPECT_TRUE(eventually([&] { return queued(path, "q") == 0; }, 2s));
  Client again = open_client(path, log);
  EXPECT_TRUE(again.try_acquire("q").ok()) << "kept for nobody";
}

// A plain waiter behind a fair line is woken when the line empties.
TEST(SqliteCrowd, APlainWaiterBehindALineIsWokenWhenItEmpties) {
  TempDir dir;
  const std::string path = dir.file("locks.db");
  LogSink log;
  Client fair_holder = open_client(path, log);
  Client plain = open_client(path, log);
  LockOptions fair;
  fair.fair = true;
  auto lease = fair_holder.acquire("f", 1s, fair).value();
  Waiting w;
  w.start(plain, "f", 20s);
  ASSERT_TRUE(eventually([&] { return queued(path, "f") == 1; }, 5s));
  auto info = plain.inspect("f");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->waiters.value_or(0), 1u);
  const auto t0 = Clock::now();
  ASSERT_TRUE(lease.release().ok());
  ASSERT_EQ(w.future.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(w.future.get().ok());
  EXPECT_LT(ms_since(t0), 1000);
}

// The FIFOs: a client's is removed when it closes; one left by a client
// that died is removed by the next client to start.
TEST(SqliteCrowd, AClientsFifoGoesWithItAndADeadOnesWithTheNextClient) {
  TempDir dir;
  const std::string path = dir.file("locks.db");
  LogSink log;
  { Client first = open_client(path, log); }
  const std::string waiters = path + "-waiters";
  ASSERT_TRUE(exists(waiters));
  const std::string dead = waiters + "/" + kSilentId;
  ASSERT_EQ(::mkfifo(dead.c_str(), 0600), 0);
  Client next = open_client(path, log);
  EXPECT_TRUE(eventually([&] { return !exists(dead); }, 2s)) << "a FIFO nobody reads is swept";
  int own = 0;
  for (const auto& e : std::filesystem::directory_iterator(waiters)) own += e.is_fifo();
  EXPECT_EQ(own, 1) << "the live client's own";
}

// A waiter whose door goes while it waits (the whole directory removed, or
// the door replaced by a regular file): the release cannot reach it and
// passes over it, but its client finds its door gone within a second,
// makes it again, and the waiter looks again. Granted long before the
// holder's lease (30 s) would have let it look.
TEST(SqliteCrowd, AWaiterWhoseDoorWentMakesItAgainAndGetsItsTurn) {
  for (const bool whole_dir : {true, false}) {
    SCOPED_TRACE(whole_dir ? "the directory removed" : "the doors replaced by files");
    TempDir dir;
    const std::string path = dir.file("locks.db"), doors = path + "-waiters";
    LogSink log;
    Client holder = open_client(path, log);
    Client waiter = open_client(path, log);
    auto lease = holder.try_acquire("d").value();
    Waiting w;
    w.start(waiter, "d", 60s);
    ASSERT_TRUE(eventually([&] { return queued(path, "d") == 1; }, 10s));
    if (whole_dir) {
      std::filesystem::remove_all(doors);
    } else {
      for (const auto& e : std::filesystem::directory_iterator(doors)) {
        std::filesystem::remove(e.path());
        std::ofstream(e.path()) << "not a door";
      }
    }
    const auto t0 = Clock::now();
    ASSERT_TRUE(lease.release().ok());
    ASSERT_EQ(w.future.wait_for(10s), std::future_status::ready) << "not woken";
    auto got = w.future.get();
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_LT(ms_since(t0), 3000) << "found by its client's look at its door, not at the holder's lease";
    int fifos = 0;
    for (const auto& e : std::filesystem::directory_iterator(doors)) fifos += e.is_fifo();
    EXPECT_GE(fifos, 1) << "the waiter's door made again";
  }
}

// A crowd starting at once on one file: a client of a file of its schema
// only reads it when it starts, so none waits for (or fails on) the write
// lock another holds. Here another program keeps it for longer than the
// clients' busy timeout.
TEST(SqliteCrowd, ClientsStartWhileAnotherProgramKeepsTheWriteLock) {
  TempDir dir;
  const std::string path = dir.file("locks.db");
  LogSink log;
  { Client first = open_client(path, log); }  // the schema made
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::vector<std::future<Status>> started;
  for (int i = 0; i < 16; ++i)
    started.push_back(std::async(std::launch::async, [&] {
      auto c = Client::try_connect("sqlite://" + path + "?busy_timeout_ms=50", quiet(log));
      return c.status();
    }));
  for (auto& f : started) {
    const Status st = f.get();
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  ASSERT_EQ(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
}

// A fair line's hand-over is told to its recipient's client and to the
// client now first in line (it looks again by the new holder's lease), not
// to every client of the file: the store's own account of what to send.
TEST(SqliteCrowd, AHandOverIsToldToItsRecipientAndTheNewHeadAlone) {
  TempDir dir;
  const std::string path = dir.file("locks.db");
  std::vector<std::unique_ptr<sqlite::LockStore>> stores;
  const std::vector<std::string> clients = {std::string(16, 'a'), std::string(16, 'b'), std::string(16, 'c'),
                                            std::string(16, 'd')};
  for (std::size_t i = 0; i < clients.size(); ++i) {
    auto s = sqlite::LockStore::open(path, 1s);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    stores.push_back(std::move(*s));
    detail::AcquireCall call;
    call.name = "f";
    call.owner = clients[i].substr(0, 1);
    call.grant = call.attempt = i + 1;
    call.lease = 30s;
    call.queued = call.keep_place = call.waits = true;
    auto out = stores[i]->acquire(call, nullptr, clients[i]);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(out->kind, i == 0 ? detail::AcquireOutcome::Kind::granted : detail::AcquireOutcome::Kind::busy);
    (void)stores[i]->take_news();
  }
  detail::ReleaseCall release;
  release.name = "f";
  release.owner = "a";
  release.grant = 1;
  release.held = 1;
  auto r = stores[0]->release(release);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto turns = stores[0]->take_news().turns;
  std::vector<std::string> told;
  for (const auto& t : turns) {
    EXPECT_EQ(t.kind, sqlite::LockStore::Turn::line);
    told.push_back(t.member);
  }
  EXPECT_EQ(told, (std::vector<std::string>{clients[1], clients[2]})) << "the recipient, then the new head";
}

// A line longer than the window a call reads (LockStore::kLineWindow): a
// hand-over that reaches past it decides again on the whole line, and the
// line keeps its order as the window moves down it.
detail::AcquireCall line_call(const std::string& owner, std::uint64_t grant, detail::LockMode mode) {
  detail::AcquireCall call;
  call.name = "long";
  call.owner = owner;
  call.grant = call.attempt = grant;
  call.lease = 60s;
  call.mode = mode;
  call.queued = call.keep_place = call.waits = true;
  return call;
}

detail::ReleaseCall release_of(const std::string& owner, std::uint64_t grant, detail::LockMode mode) {
  detail::ReleaseCall r;
  r.name = "long";
  r.owner = owner;
  r.grant = grant;
  r.held = 1;
  r.mode = mode;
  return r;
}

TEST(SqliteCrowd, AReleaseHandsOverToEveryReaderOfALineLongerThanTheWindow) {
  TempDir dir;
  auto store = sqlite::LockStore::open(dir.file("locks.db"), 1s).value();
  const auto x = detail::LockMode::exclusive, sh = detail::LockMode::shared;
  ASSERT_EQ(store->acquire(line_call("w", 1, x))->kind, detail::AcquireOutcome::Kind::granted);
  const int readers = static_cast<int>(sqlite::LockStore::kLineWindow) + 8;
  for (int i = 0; i < readers; ++i)
    ASSERT_EQ(store->acquire(line_call("r" + std::to_string(i), 100 + i, sh))->kind,
              detail::AcquireOutcome::Kind::busy);
  auto released = store->release(release_of("w", 1, x));
  ASSERT_TRUE(released.ok()) << released.status().to_string();
  auto info = store->inspect("long");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->holders, static_cast<unsigned>(readers)) << "every reader granted, past the window too";
  EXPECT_EQ(info->waiters.value_or(99), 0u);
}

TEST(SqliteCrowd, ALineLongerThanTheWindowIsServedInItsOrder) {
  TempDir dir;
  auto store = sqlite::LockStore::open(dir.file("locks.db"), 1s).value();
  const auto x = detail::LockMode::exclusive;
  const int n = static_cast<int>(sqlite::LockStore::kLineWindow) * 2 + 5;
  for (int i = 0; i < n; ++i) ASSERT_TRUE(store->acquire(line_call("o" + std::to_string(i), 1 + i, x)).ok());
  // The last one keeps its place when it looks again (its row is read
  // wherever it is).
  ASSERT_EQ(store->acquire(line_call("o" + std::to_string(n - 1), n, x))->kind, detail::AcquireOutcome::Kind::busy);
  (void)store->take_news();
  for (int i = 0; i + 1 < n; ++i) {
    ASSERT_TRUE(store->release(release_of("o" + std::to_string(i), 1 + i, x)).ok());
    auto holders = store->holders("long");
    ASSERT_TRUE(holders.ok());
    ASSERT_EQ(holders->size(), 1u);
    EXPECT_EQ((*holders)[0].owner, "o" + std::to_string(i + 1)) << "handed over in the order they came";
  }
}

}  // namespace
}  // namespace dlock::test

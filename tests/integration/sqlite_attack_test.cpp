// The SQLite backend against what another user of the machine can do to it:
// delete or replace the lock file, run a holder or a waiter in another pid
// or time namespace (containers, CRIU), or leave no inotify instances. Each
// test spawns the other side as a child process on the same real file.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>

#include "integration/common.hpp"
#include "support/temp_dir.hpp"

namespace dlock::test {
namespace {

std::string url_of(const TempDir& dir) { return "sqlite://" + dir.file("locks.db"); }

bool write_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// Runs body() in a grandchild inside new namespaces (`flags`, as unshare(2)),
// as `unshare --fork` does: the calling child only waits for it. The
// grandchild dies with the child. `setup` runs between unshare and fork (the
// time namespace's offsets must be set before a process enters it).
int in_namespaces(int flags, const std::function<bool()>& setup, const std::function<int()>& body) {
  if (unshare(flags) != 0) return 90;
  if (setup && !setup()) return 91;
  const pid_t kid = fork();
  if (kid < 0) return 92;
  if (kid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    _exit(body());
  }
  int status = 0;
  if (waitpid(kid, &status, 0) != kid) return 93;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Namespaces, another uid and lchown need root (as on the test machines).
#define REQUIRE_ROOT() \
  if (geteuid() != 0) GTEST_SKIP() << "needs root (namespaces, another user)"

bool set_boottime_offset() { return write_file("/proc/self/timens_offsets", "boottime 100000 0"); }

// Blocks until the parent writes a byte to the pipe.
void await(int fd) {
  char c;
  (void)!::read(fd, &c, 1);
}

// --- item: the file deleted or replaced under a holder --------------------

void remove_lock_files(const TempDir& dir) {
  for (const char* suffix : {"", "-wal", "-shm", "-wake"})
    std::remove(dir.file(std::string("locks.db") + suffix).c_str());
}

TEST(SqliteAttack, ADeletedLockFileIsNoticedByItsHolder) {
  TempDir dir;
  LogSink log;
  auto a = Client::connect(url_of(dir), quiet(log));
  auto held = a.acquire("job", 0ms, fast_watchdog(2000ms, 500ms));
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  remove_lock_files(dir);
  const auto removed = Clock::now();

  auto b = Client::connect(url_of(dir), quiet(log));
  auto other = b.try_acquire("job");
  ASSERT_TRUE(other.ok()) << "a new file is a new lock table: " << other.status().to_string();
  EXPECT_EQ(other->fence(), 1u) << "fences restart with a new file (README says so)";

  EXPECT_TRUE(eventually([&] { return held->lost(); }, 5s)) << "the holder never learned its file was deleted";
  measure("sqlite_deleted_file_loss_notice", ms_since(removed));
  EXPECT_FALSE(held->release().ok()) << "a release into a deleted file is not a release";
}

TEST(SqliteAttack, AReplacedLockFileIsUsedByTheNextCall) {
  TempDir dir;
  LogSink log;
  auto a = Client::connect(url_of(dir), quiet(log));
  auto held = a.acquire("job", 0ms);
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  // Another lock table moved over the path, held there by someone else.
  const std::string fresh = dir.file("fresh.db");
  {
    auto b = Client::connect("sqlite://" + fresh, quiet(log));
    ASSERT_TRUE(b.inspect("job").ok());
  }
  std::filesystem::rename(fresh, dir.file("locks.db"));
  auto b = Client::connect(url_of(dir), quiet(log));
  auto other = b.try_acquire("other");
  ASSERT_TRUE(other.ok()) << other.status().to_string();

  EXPECT_TRUE(eventually([&] { return held->lost(); }, 5s));
  auto again = a.try_acquire("other");
  EXPECT_EQ(again.status().code(), Errc::busy) << "the client still grants from the file it opened first";
}

// --- item: a holder in a pid namespace without its own /proc --------------

// The holder's pid inside its namespace is the pid of an unrelated process
// outside (`victim`); /proc is the outer one, so /proc/<getpid()> is the
// victim. Its death must not free the lock.
TEST(SqliteAttack, AnUnrelatedDeathDoesNotFreeAHolderInAPidNamespace) {
  REQUIRE_ROOT();
  TempDir dir;
  const std::string url = url_of(dir), marker = dir.file("held");
  const pid_t victim = fork_child([] {
    pause();
    return 0;
  });
  const pid_t holder = fork_child([&] {
    return in_namespaces(CLONE_NEWPID, nullptr, [&] {  // pid 1 of the namespace: make the next pid the victim's number
      if (!write_file("/proc/sys/kernel/ns_last_pid", std::to_string(victim - 1))) return 80;
      const pid_t kid = fork();
      if (kid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getpid() != victim) _exit(81);
        LogSink log;
        auto client = Client::connect(url, quiet(log));
        auto lease = client.acquire("job", 5s);
        if (!lease.ok()) _exit(82);
        std::ofstream(marker) << lease->fence();
        pause();
        _exit(0);
      }
      int status = 0;
      waitpid(kid, &status, 0);
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    });
  });
  ASSERT_TRUE(eventually([&] { return read_number(marker) > 0 || wait_exit(holder, 0ms) >= 0; }, 10s));
  ASSERT_GT(read_number(marker), 0) << "the holder could not be set up";

  LogSink log;
  auto client = Client::connect(url, quiet(log));
  EXPECT_EQ(client.try_acquire("job").status().code(), Errc::busy);
  auto waiter = std::async(std::launch::async, [&] { return client.acquire("job", 1500ms); });
  kill(victim, SIGKILL);
  EXPECT_EQ(wait_exit(victim, 10s), 128 + SIGKILL);
  auto got = waiter.get();
  EXPECT_EQ(got.status().code(), Errc::timeout) << "granted while the holder lives";
  EXPECT_EQ(client.try_acquire("job").status().code(), Errc::busy) << "taken while the holder lives";
  kill(holder, SIGKILL);
  wait_exit(holder, 10s);
}

// A child forked after its parent used the store is a holder of its own:
// its rows name it, not the parent, so its death frees them.
TEST(SqliteAttack, AForkedChildIsItsOwnHolder) {
  TempDir dir;
  const std::string url = url_of(dir);
  LogSink log;
  { ASSERT_TRUE(Client::connect(url, quiet(log)).try_acquire("warm-up").ok()); }
  const pid_t kid = fork_child([&] {
    LogSink child_log;
    auto client = Client::connect(url, quiet(child_log));
    auto lease = client.acquire("job", 5s);
    if (!lease.ok()) return 1;
    _exit(0);  // no release
  });
  ASSERT_EQ(wait_exit(kid, 10s), 0);
  auto client = Client::connect(url, quiet(log));
  auto got = client.try_acquire("job");
  EXPECT_TRUE(got.ok()) << "the dead child's lock still held: " << got.status().to_string();
}

// --- item: another time namespace (CLOCK_BOOTTIME differs) ----------------

TEST(SqliteAttack, AWaiterInAnotherTimeNamespaceSeesALiveHolder) {
  REQUIRE_ROOT();
  TempDir dir;
  const std::string url = url_of(dir);
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t waiter = fork_child([&] {
    await(go[0]);
    return in_namespaces(CLONE_NEWTIME, set_boottime_offset, [&] {
      LogSink log;
      auto client = Client::connect(url, quiet(log));
      auto got = client.try_acquire("job");
      if (got.ok()) return 1;  // taken from a live holder
      return got.status().code() == Errc::busy ? 0 : 2;
    });
  });
  LogSink log;
  auto client = Client::connect(url, quiet(log));
  auto held = client.acquire("job", 0ms);
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  EXPECT_EQ(wait_exit(waiter, 20s), 0) << "1: granted to a waiter in another time namespace";
  EXPECT_FALSE(held->lost());
  close(go[0]);
  close(go[1]);
}

TEST(SqliteAttack, AHolderInAnotherTimeNamespaceKeepsItsLock) {
  REQUIRE_ROOT();
  TempDir dir;
  const std::string url = url_of(dir), marker = dir.file("held");
  const pid_t holder = fork_child([&] {
    return in_namespaces(CLONE_NEWTIME, set_boottime_offset, [&] {
      LogSink log;
      auto client = Client::connect(url, quiet(log));
      auto lease = client.acquire("job", 5s);
      if (!lease.ok()) return 1;
      std::ofstream(marker) << lease->fence();
      pause();
      return 0;
    });
  });
  ASSERT_TRUE(eventually([&] { return read_number(marker) > 0 || wait_exit(holder, 0ms) >= 0; }, 10s));
  ASSERT_GT(read_number(marker), 0) << "the holder could not be set up";
  LogSink log;
  auto client = Client::connect(url, quiet(log));
  EXPECT_EQ(client.try_acquire("job").status().code(), Errc::busy);
  EXPECT_TRUE(client.inspect("job")->held);
  kill(holder, SIGKILL);
  EXPECT_EQ(wait_exit(holder, 10s), 128 + SIGKILL);
}

// After unshare(CLONE_NEWTIME) the process itself stays in its namespace
// while /proc/self/timens_offsets shows its future children's: its offset
// is unknown, and it is told so rather than compare the wrong instants.
TEST(SqliteAttack, AProcessWhoseOwnTimeOffsetIsUnknownIsRefused) {
  REQUIRE_ROOT();
  TempDir dir;
  const std::string url = url_of(dir);
  const pid_t kid = fork_child([&] {
    if (unshare(CLONE_NEWTIME) != 0 || !set_boottime_offset()) return 90;
    LogSink log;
    auto client = Client::try_connect(url, quiet(log));
    if (client.ok()) return 1;
    return client.status().code() == Errc::invalid_argument ? 0 : 2;
  });
  EXPECT_EQ(wait_exit(kid, 20s), 0);
}

// --- item: no inotify instance left -------------------------------------

// Runs body() in a child as a user of its own (so no one else's instances
// are touched) that has used up its inotify instances.
int without_inotify(const TempDir& dir, const std::function<int()>& body) {
  if (chmod(dir.path().c_str(), 0777) != 0) return 60;
  return wait_exit(fork_child([&] {
                     constexpr uid_t kUser = 54321;
                     if (setgid(kUser) != 0 || setuid(kUser) != 0) return 70;
                     int used = 0;
                     while (inotify_init1(IN_CLOEXEC) >= 0) ++used;
                     if (errno != EMFILE || used > 100000) return 71;
                     return body();
                   }),
                   30s);
}

TEST(SqliteAttack, WithoutInotifyTheStoreWorksAndAWaiterIsGranted) {
  REQUIRE_ROOT();
  TempDir dir;
  const std::string url = url_of(dir);
  EXPECT_EQ(without_inotify(dir,
                            [&] {
                              LogSink log;
                              auto a = Client::try_connect(url, quiet(log));
                              if (!a.ok()) {
                                std::cerr << "connect: " << a.status().to_string() << "\n";
                                return 1;
                              }
                              LockOptions short_lease;
                              short_lease.lease = 300ms;
                              auto held = a->acquire("job", 0ms, short_lease);
                              if (!held.ok()) return 2;
                              auto b = Client::connect(url, quiet(log));
                              if (b.try_acquire("job").status().code() != Errc::busy) return 3;
                              auto got = b.acquire("job", 10s);
                              return got.ok() ? 0 : 4;
                            }),
            0);
}

// Without inotify a waiter looks at the wake file every 50 ms (a read of 8
// bytes), and tries the lock only when it changed: a 3 s wait costs the
// database a try or two, not one every 10-500 ms, and the release still
// wakes it at once.
TEST(SqliteAttack, WithoutInotifyAWaiterWatchesTheWakeFileNotTheDatabase) {
  REQUIRE_ROOT();
  TempDir dir;
  const std::string url = url_of(dir);
  EXPECT_EQ(without_inotify(dir,
                            [&] {
                              LogSink log;
                              auto a = Client::connect(url, quiet(log));
                              LockOptions long_lease;
                              long_lease.lease = 10s;
                              auto held = a.acquire("job", 0ms, long_lease);
                              if (!held.ok()) return 1;
                              auto b = Client::connect(url, quiet(log));
                              const auto sent = b.stats().commands_sent;
                              auto waiting = std::async(std::launch::async, [&] { return b.acquire("job", 20s); });
                              std::this_thread::sleep_for(3s);
                              const auto during = b.stats().commands_sent - sent;
                              const auto released = std::chrono::steady_clock::now();
                              if (!held->release().ok()) return 2;
                              auto got = waiting.get();
                              if (!got.ok()) return 3;
                              if (std::chrono::steady_clock::now() - released > 1s) return 4;
                              if (during > 4) {
                                std::cerr << during << " commands while waiting 3 s\n";
                                return 5;
                              }
                              return 0;
                            }),
            0);
}

// Without inotify the holder learns of a deleted file at its next renewal.
TEST(SqliteAttack, WithoutInotifyADeletedFileIsNoticedAtTheNextRenewal) {
  REQUIRE_ROOT();
  TempDir dir;
  const std::string url = url_of(dir);
  EXPECT_EQ(without_inotify(dir,
                            [&] {
                              LogSink log;
                              auto a = Client::connect(url, quiet(log));
                              auto held = a.acquire("job", 0ms, fast_watchdog(2000ms, 300ms));
                              if (!held.ok()) return 1;
                              remove_lock_files(dir);
                              if (!eventually([&] { return held->lost(); }, 5s)) return 2;
                              return held->release().ok() ? 3 : 0;
                            }),
            0);
}

// The inotify instances this process has open.
int inotify_instances() {
  int n = 0;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(fd.path(), ec).string() == "anon_inode:inotify") ++n;
  }
  return n;
}

// 150 clients in one process (past the default 128 instances per user):
// one inotify instance serves them all (none warns of missing release
// notifications), and waiters among them are woken in turn.
TEST(SqliteAttack, ManyClientsInOneProcessShareOneInotifyInstance) {
  TempDir dir;
  const std::string url = url_of(dir);
  LogSink log;
  const int before = inotify_instances();
  std::vector<Client> clients;
  for (int i = 0; i < 150; ++i) clients.push_back(Client::connect(url, quiet(log)));
  EXPECT_LE(inotify_instances() - before, 1);
  auto held = clients[0].acquire("job", 0ms);
  ASSERT_TRUE(held.ok());
  std::vector<std::future<bool>> waiters;
  for (int i = 110; i < 150; ++i)  // the last ones, which got no instance of their own before
    waiters.push_back(std::async(std::launch::async, [&, i] {
      auto got = clients[static_cast<std::size_t>(i)].acquire("job", 60s);
      return got.ok() && got->release().ok();
    }));
  std::this_thread::sleep_for(500ms);
  ASSERT_TRUE(held->release().ok());
  int granted = 0;
  for (auto& w : waiters) granted += w.get() ? 1 : 0;
  EXPECT_EQ(granted, 40);
  EXPECT_FALSE(log.contains("no release notifications"));
}

// Clients joining, listening and leaving the process's inotify instance
// while releases ring it: nothing is posted to a client that left (its I/O
// loop goes with it). Run under the sanitizers too.
TEST(SqliteAttack, ClientsComeAndGoWhileTheSharedInotifyRings) {
  TempDir dir;
  const std::string url = url_of(dir);
  LogSink log;
  std::atomic<bool> stop{false};
  std::thread ringer([&] {
    Client c = Client::connect(url, quiet(log));
    while (!stop) {
      auto held = c.try_acquire("x");
      if (held.ok()) (void)held->release();
    }
  });
  std::vector<std::thread> churn;
  std::atomic<int> rounds{0};
  for (int t = 0; t < 6; ++t)
    churn.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        Client c = Client::connect(url, quiet(log));
        auto got = c.acquire("x", 20ms);  // listens while it waits, maybe woken as it goes
        if (got.ok()) (void)got->release();
        ++rounds;
      }
    });
  for (auto& t : churn) t.join();
  stop = true;
  ringer.join();
  EXPECT_EQ(rounds.load(), 150);
}

// The process's inotify reader goes with its last client: a process that
// no longer uses SQLite keeps no thread of it (a child forked then may
// start threads, under ThreadSanitizer too).
TEST(SqliteAttack, TheLastClientToGoTakesTheInotifyReaderWithIt) {
  TempDir dir;
  LogSink log;
  std::thread([] {}).join();  // ThreadSanitizer's own thread starts with the first one
  const int before = thread_count();
  {
    Client a = Client::connect(url_of(dir), quiet(log));
    Client b = Client::connect(url_of(dir), quiet(log));
    EXPECT_GT(thread_count(), before);
  }
  EXPECT_EQ(thread_count(), before);
}

// --- item: another program holding the write lock -----------------------

// While another program keeps the file's write lock, a write of the client
// waits for it (up to busy_timeout_ms) without holding up the client's
// other calls: a read of another lock answers at once.
TEST(SqliteAttack, AWaitForTheWriteLockStallsNoOtherCall) {
  TempDir dir;
  LogSink log;
  auto client = Client::connect(url_of(dir) + "?busy_timeout_ms=60000", quiet(log));
  auto renewed = client.acquire("r", 0ms, fast_watchdog(5000ms, 50ms));  // renewals wait in the queue
  ASSERT_TRUE(renewed.ok());
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(dir.file("locks.db").c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::this_thread::sleep_for(200ms);  // the fault lasts a few renewal ticks

  std::promise<Result<Lease>> acquired;
  client.async_acquire("a", 60s, {}, [&](Result<Lease> r) { acquired.set_value(std::move(r)); });
  const auto asked = Clock::now();
  auto read = std::async(std::launch::async, [&] { return client.inspect("b"); });
  const bool answered = read.wait_for(10s) == std::future_status::ready;
  measure("sqlite_inspect_while_write_lock_held", ms_since(asked));
  EXPECT_TRUE(answered) << "a read waited behind another call's wait for the write lock";

  ASSERT_EQ(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  auto got = acquired.get_future().get();
  EXPECT_TRUE(got.ok()) << got.status().to_string();
  if (answered) {
    EXPECT_TRUE(read.get().ok());
  }
  EXPECT_FALSE(renewed->lost()) << "a renewal that waited for the write lock was given up";
  EXPECT_TRUE(renewed->release().ok());
}

// A call with a deadline returns by it while another program keeps the
// write lock for longer: the fast path does not wait busy_timeout_ms (here
// a minute) and the slow path then another.
TEST(SqliteAttack, ADeadlineHoldsWhileAnotherProgramKeepsTheWriteLock) {
  TempDir dir;
  LogSink log;
  auto client = Client::connect(url_of(dir) + "?busy_timeout_ms=60000", quiet(log));
  ASSERT_TRUE(client.inspect("b").ok());
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(dir.file("locks.db").c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);

  auto asked = Clock::now();
  auto once = client.try_acquire("a");
  measure("sqlite_try_acquire_while_write_lock_held", ms_since(asked));
  EXPECT_EQ(once.status().code(), Errc::busy) << once.status().to_string();  // as if held: look again later
  EXPECT_LT(ms_since(asked), 10000) << "try_acquire waited for the busy timeout";

  asked = Clock::now();
  auto waited = client.acquire("a", 300ms);
  measure("sqlite_acquire_300ms_while_write_lock_held", ms_since(asked));
  EXPECT_EQ(waited.status().code(), Errc::timeout) << waited.status().to_string();
  EXPECT_LT(ms_since(asked), 10000) << "a 300 ms wait waited for the busy timeout";

  ASSERT_EQ(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  EXPECT_TRUE(client.try_acquire("a").ok());
}

// A release has no deadline: it waits for the write lock (up to
// busy_timeout_ms) rather than leave the lock held until its lease.
TEST(SqliteAttack, AReleaseWaitsForAnotherProgramsWriteLock) {
  TempDir dir;
  LogSink log;
  auto client = Client::connect(url_of(dir), quiet(log));
  auto held = client.acquire("a", 0ms);
  ASSERT_TRUE(held.ok());
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(dir.file("locks.db").c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  auto other_commits = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(200ms);  // the other program's transaction
    return sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr);
  });
  Status released = held->release();
  EXPECT_TRUE(released.ok()) << released.to_string();
  EXPECT_EQ(other_commits.get(), SQLITE_OK);
  sqlite3_close(other);
  EXPECT_FALSE(client.inspect("a")->held);
}

// --- item: a directory another user could plant -------------------------

// As /tmp/dlock-UID when HOME is unset: in a world-writable directory,
// another user makes the name a link to a directory of the victim's; later
// they can point it at one of their own, with a lock table of their own.
TEST(SqliteAttack, ALinkOfAnotherUserIsNotFollowed) {
  REQUIRE_ROOT();
  TempDir dir;
  const std::string shared = dir.file("tmp"), real = dir.file("real");
  ASSERT_EQ(mkdir(shared.c_str(), 01777), 0);
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);
  ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
  const std::string planted = shared + "/dlock-0", mine = shared + "/mine";
  ASSERT_EQ(symlink(real.c_str(), planted.c_str()), 0);
  ASSERT_EQ(lchown(planted.c_str(), 54321, 54321), 0);
  ASSERT_EQ(symlink(real.c_str(), mine.c_str()), 0);

  LogSink log;
  auto refused = Client::try_connect("sqlite://" + planted + "/locks.db", quiet(log));
  ASSERT_FALSE(refused.ok()) << "followed a link another user owns";
  EXPECT_EQ(refused.status().code(), Errc::permission_denied);
  EXPECT_NE(refused.status().message().find("uid 54321"), std::string::npos) << refused.status().message();
  EXPECT_TRUE(Client::try_connect("sqlite://" + mine + "/locks.db", quiet(log)).ok()) << "a link of our own is fine";

  // The file itself as a link of another user's.
  const std::string file_link = real + "/other.db";
  ASSERT_EQ(symlink(dir.file("x.db").c_str(), file_link.c_str()), 0);
  ASSERT_EQ(lchown(file_link.c_str(), 54321, 54321), 0);
  EXPECT_EQ(Client::try_connect("sqlite://" + file_link, quiet(log)).status().code(), Errc::permission_denied);
}

}  // namespace
}  // namespace dlock::test

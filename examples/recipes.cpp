// Each recipe once, on any backend: a fair Mutex, a SharedMutex, a
// Semaphore and an Election, each with two contenders so the waiting shows.
//
//   dlock-recipes-example --url sqlite:///tmp/locks.db    (the default)
//   dlock-recipes-example --url redis://127.0.0.1:6379
//   dlock-recipes-example --url postgres://user@127.0.0.1/db
//   dlock-recipes-example --url zk://127.0.0.1:2181/locks
//
// Exits 0 when every recipe behaved as documented (the tests run it so).
#include <chrono>
#include <cstring>
#include <dlock/dlock.hpp>
#include <future>
#include <iostream>
#include <mutex>
#include <shared_mutex>
#include <string>

using namespace std::chrono_literals;

namespace {

bool check(bool ok, const char* what) {
  std::cout << (ok ? "  ok    " : "  WRONG ") << what << '\n';
  return ok;
}

// A fair lock: waiters are granted in arrival order, each grant's fence
// above the last (pass it to what the lock protects).
bool fair_mutex(const dlock::Client& client) {
  std::cout << "fair Mutex\n";
  dlock::LockOptions fair;
  fair.fair = true;
  dlock::Mutex first(client, "example:fair", fair), second(client, "example:fair", fair);
  std::unique_lock held(first);
  const auto fence = first.fence();
  auto waiter = std::async(std::launch::async, [&] {
    std::unique_lock l(second);  // waits in line for first's release
    return second.fence();
  });
  bool ok = check(waiter.wait_for(200ms) == std::future_status::timeout, "the second waits while the first holds");
  held.unlock();
  return check(waiter.get() > fence, "the second is granted next, with a higher fence") && ok;
}

// Readers share; a writer waits for them, and readers arriving behind it wait.
bool shared_mutex(const dlock::Client& client) {
  std::cout << "SharedMutex\n";
  dlock::SharedMutex reader(client, "example:config"), writer(client, "example:config");
  std::shared_lock read(reader);
  dlock::SharedMutex another(client, "example:config");
  bool ok = check(another.try_lock_shared(), "a second reader reads beside the first");
  another.unlock_shared();
  ok = check(!writer.try_lock(), "a writer cannot write while they read") && ok;
  read.unlock();
  ok = check(writer.try_lock_for(5s), "the writer writes once the readers are gone") && ok;
  writer.unlock();
  return ok;
}

// At most N holders at once; a release gives the permit to the next in line.
bool semaphore(const dlock::Client& client) {
  std::cout << "Semaphore\n";
  dlock::Semaphore a(client, "example:render-slots", 2), b(client, "example:render-slots", 2),
      c(client, "example:render-slots", 2);
  a.acquire();
  b.acquire();
  bool ok = check(!c.try_acquire(), "a third holder of 2 permits is refused");
  ok = check(a.release().ok(), "a permit is given back") && ok;
  ok = check(c.try_acquire_for(5s), "and taken by the third") && ok;
  ok = check(c.held() == 1 && a.held() == 0, "held() counts each object's permits") && ok;
  return ok;
}

// One leader at a time; its term (the grant's fence) grows from leader to
// leader, so a deposed leader's writes can be refused.
bool election(const dlock::Client& client) {
  std::cout << "Election\n";
  dlock::Election alice(client, "example:scheduler", "alice"), bob(client, "example:scheduler", "bob");
  auto lead = alice.campaign(5s);
  bool ok = check(lead.ok() && lead->leading(), "alice leads");
  auto leader = bob.leader();
  ok = check(leader.ok() && *leader && (*leader)->id == "alice", "bob sees alice as the leader") && ok;
  ok = check(bob.campaign(0ms).code() == dlock::Errc::busy, "bob cannot lead meanwhile") && ok;
  const auto term = lead->term();
  ok = check(lead->resign().ok(), "alice resigns") && ok;
  auto next = bob.campaign(5s);
  return check(next.ok() && next->term() > term, "bob leads, in a higher term") && ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::string url = "sqlite:///tmp/dlock-recipes-example.db";
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--url") == 0) url = argv[i + 1];
  try {
    auto client = dlock::Client::connect(url);
    std::cout << "on " << dlock::describe_url(url) << '\n';
    bool ok = true;
    for (auto recipe : {fair_mutex, shared_mutex, semaphore, election}) ok = recipe(client) && ok;
    std::cout << (ok ? "every recipe as documented\n" : "a recipe did not behave as documented\n");
    return ok ? 0 : 1;
  } catch (const dlock::Error& e) {
    std::cerr << "dlock-recipes-example: " << e.what() << " (next step: " << dlock::to_string(e.next_step()) << ")\n";
    return 1;
  }
}

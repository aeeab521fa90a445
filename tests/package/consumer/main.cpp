// A consumer of the installed (or add_subdirectory'd) dlock: uses the public
// API without a server. Prints the version; exits 0 only if every check holds.
// With CONSUMER_WITH_SQLITE it takes and releases a lock in a SQLite file of
// a temporary directory; with CONSUMER_WITH_ASIO also through <dlock/asio.hpp>
// (asio_check.cpp).
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <dlock/dlock.hpp>
#include <filesystem>
#include <string>
#include <system_error>

#if CONSUMER_WITH_ASIO
// asio_check.cpp: the same through <dlock/asio.hpp>.
void check_asio(const dlock::Client& client, void (*check)(bool, const std::string&));
#endif

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    ++failures;
  }
}

#if CONSUMER_WITH_SQLITE
// A lock in a SQLite file: acquired with a fence, released, acquired again
// with a larger fence.
void check_sqlite() {
  std::string dir = (std::filesystem::temp_directory_path() / "dlock-consumer-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    check(false, "mkdtemp " + dir);
    return;
  }
  {
    const std::string url = "sqlite://" + dir + "/locks.db";
    auto client = dlock::Client::try_connect(url);
    check(client.ok(), "try_connect(" + url + "): " + client.status().to_string());
    if (client.ok()) {
      auto lease = client.value().try_acquire("consumer");
      check(lease.ok(), "try_acquire on SQLite: " + lease.status().to_string());
      if (lease.ok()) {
        const std::uint64_t fence = lease.value().fence();
        check(fence > 0, "a SQLite grant has a fence > 0, got " + std::to_string(fence));
        auto busy = client.value().try_acquire("consumer");
        check(!busy.ok() && busy.code() == dlock::Errc::busy, "a held lock is busy for another try_acquire");
        const dlock::Status released = lease.value().release();
        check(released.ok(), "release on SQLite: " + released.to_string());
        auto again = client.value().try_acquire("consumer");
        check(again.ok() && again.value().fence() > fence, "the next grant has a larger fence");
        if (again.ok()) check(again.value().release().ok(), "the second release");
      }
#if CONSUMER_WITH_ASIO
      check_asio(client.value(), check);
#endif
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::printf("sqlite checks done\n");
}
#endif

}  // namespace

int main() {
  std::printf("dlock %s\n", DLOCK_VERSION_STRING);
  check(std::string(DLOCK_VERSION_STRING) == std::to_string(DLOCK_VERSION_MAJOR) + "." +
                                                 std::to_string(DLOCK_VERSION_MINOR) + "." +
                                                 std::to_string(DLOCK_VERSION_PATCH),
        "DLOCK_VERSION_STRING matches the numeric version macros");

#if CONSUMER_WITH_REDIS
  // Nothing listens on port 1: refused.
  dlock::ClientOptions options;
  options.connect_timeout = std::chrono::milliseconds(2000);
  auto refused = dlock::Client::try_connect("redis://127.0.0.1:1", options);
  check(!refused.ok(), "try_connect(redis://127.0.0.1:1) fails");
  check(refused.code() == dlock::Errc::unavailable,
        "try_connect(redis://127.0.0.1:1) gives unavailable, got " + refused.status().to_string());
  check(refused.status().next_step() == dlock::NextStep::retry, "unavailable means retry");
#endif

  auto bad = dlock::Client::try_connect("nonsense://x");
  check(!bad.ok(), "try_connect(nonsense://x) fails");
  check(bad.code() == dlock::Errc::invalid_argument,
        "try_connect(nonsense://x) gives invalid_argument, got " + bad.status().to_string());
  check(bad.status().next_step() == dlock::NextStep::give_up, "invalid_argument means give up");

  try {
    (void)dlock::Client::connect("nonsense://x");
    check(false, "connect(nonsense://x) throws");
  } catch (const dlock::Error& e) {
    check(e.code() == dlock::Errc::invalid_argument, std::string("connect(nonsense://x) throws ") + e.what());
  }

  check(dlock::to_string(dlock::Errc::outcome_unknown) == "outcome_unknown", "to_string(Errc)");
  std::error_code ec = dlock::Errc::busy;
  check(std::string(ec.category().name()) == "dlock", "the error category is named dlock");

  const std::string owner = dlock::Client::random_owner();
  check(!owner.empty() && owner != dlock::Client::random_owner(), "random_owner() gives fresh ids");

#if CONSUMER_WITH_SQLITE
  check_sqlite();
#endif

  if (failures != 0) {
    std::fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  std::printf("all checks passed\n");
  return 0;
}

// A consumer of the installed (or add_subdirectory'd) dlock: uses the public
// API without a server. Prints the version; exits 0 only if every check holds.
#include <chrono>
#include <cstdio>
#include <dlock/dlock.hpp>
#include <string>
#include <system_error>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    ++failures;
  }
}

}  // namespace

int main() {
  std::printf("dlock %s\n", DLOCK_VERSION_STRING);
  check(std::string(DLOCK_VERSION_STRING) == std::to_string(DLOCK_VERSION_MAJOR) + "." +
                                                 std::to_string(DLOCK_VERSION_MINOR) + "." +
                                                 std::to_string(DLOCK_VERSION_PATCH),
        "DLOCK_VERSION_STRING matches the numeric version macros");

  // Nothing listens on port 1: refused.
  dlock::ClientOptions options;
  options.connect_timeout = std::chrono::milliseconds(2000);
  auto refused = dlock::Client::try_connect("redis://127.0.0.1:1", options);
  check(!refused.ok(), "try_connect(redis://127.0.0.1:1) fails");
  check(refused.code() == dlock::Errc::unavailable,
        "try_connect(redis://127.0.0.1:1) gives unavailable, got " + refused.status().to_string());
  check(refused.status().next_step() == dlock::NextStep::retry, "unavailable means retry");

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

  if (failures != 0) {
    std::fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  std::printf("all checks passed\n");
  return 0;
}

// tests/support/process.hpp: child processes for the tests.
//
//   auto child = dlock::test::spawn({"redis-server", "--port", "17001"});
//   ...
//   kill(child.pid, SIGTERM);
//   int status = dlock::test::wait_exit(child.pid, std::chrono::seconds(5));
//
//   pid_t pid = dlock::test::fork_child([&] { return lock_and_hold() ? 0 : 1; });
//   EXPECT_EQ(dlock::test::wait_exit(pid, std::chrono::seconds(10)), 0);
//
//   auto r = dlock::test::run({"openssl", "version"}, std::chrono::seconds(5));
//
// Children started here get SIGKILL when the test process dies (so a crashed
// or killed test leaves no servers behind), but only when started from the
// main thread: Linux delivers the signal when the *thread* that forked exits,
// so children forked from other threads are not tied to the parent at all.
//
// All functions are safe to call from any thread; fork() in a multi-threaded
// process is fine here because the child only calls async-signal-safe
// functions before exec (spawn, run) or runs the caller's body (fork_child).
// spawn, wait_exit and join_args are tools/common's (common/spawn.hpp).
#ifndef DLOCK_TESTS_SUPPORT_PROCESS_HPP_
#define DLOCK_TESTS_SUPPORT_PROCESS_HPP_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/capture.hpp"
#include "common/child_process.hpp"
#include "common/spawn.hpp"

namespace dlock::test {

using tools::Child;
using tools::Env;
using tools::join_args;
using tools::run;  // a program to its end, its output captured (common/capture.hpp)
using tools::RunResult;
using tools::wait_exit;

// Starts argv[0] (looked up in PATH unless it contains a '/') with the
// parent's environment plus `env`, stdin from /dev/null, in its own process
// group. stdout and stderr go to `output_file` (created or appended) or, if
// empty, to the parent's. Throws std::runtime_error if the program is not
// found or cannot be executed (the message names it).
Child spawn(const std::vector<std::string>& argv, const Env& env = {}, const std::string& output_file = {});

// Forks; the child runs body() and then _exit()s with its result (an
// exception escaping body() is printed to stderr and exits with 125). Child
// processes cannot report gtest assertions: let body() return non-zero
// instead. The parent gets the pid and must reap it with wait_exit. The
// child has only the forking thread: it must not use objects whose threads
// stayed behind in the parent (make its own dlock::Client).
//
// Under ThreadSanitizer a child forked while the parent has other threads
// (e.g. a live dlock::Client's I/O thread) dies with exit status 66 as soon
// as it starts a thread. Fork the children before creating clients in the
// parent (or after destroying them); fork_child warns on stderr otherwise.
pid_t fork_child(std::function<int()> body);

// Threads of this process now (from /proc/self/status).
int thread_count();

// True if this code was built with -fsanitize=thread.
bool under_thread_sanitizer();

}  // namespace dlock::test

#endif  // DLOCK_TESTS_SUPPORT_PROCESS_HPP_

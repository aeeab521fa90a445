// tools/common/spawn.hpp: the one fork/exec of the tests, the verifier, the
// experiments and the benchmarks' helpers (tests/support/process.hpp and
// common/child_process.hpp build on it).
//
//   dlock::tools::SpawnOptions options;
//   options.output_file = "redis.log";
//   pid_t pid = dlock::tools::spawn({"redis-server", "--port", "17001"}, options);
//   int status = dlock::tools::wait_exit(pid, std::chrono::seconds(5));
//
// Safe from any thread: between fork and exec the child makes only
// async-signal-safe calls.
#ifndef DLOCK_TOOLS_COMMON_SPAWN_HPP_
#define DLOCK_TOOLS_COMMON_SPAWN_HPP_

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace dlock::tools {

// Variables added to (or replacing those of) the parent's environment.
using Env = std::map<std::string, std::string>;

struct SpawnOptions {
  Env env;
  // stdout and stderr, where not given an fd below, are appended to this
  // file (created if need be); "": the parent's.
  std::string output_file;
  int out_fd = -1;  // dup2'ed to stdout
  int err_fd = -1;  // and stderr
  // Its own process group (killable as one, out of reach of a terminal's
  // Ctrl-C) and SIGKILL when the forking thread ends, so that a crashed
  // test leaves no server behind: Linux ties the child to the *thread*
  // that forked, so this holds only for children forked from the main
  // thread. Off: it stays in the parent's group and may outlive it.
  bool isolate = true;
};

// Starts argv[0] (looked up in PATH unless it contains a '/'), stdin from
// /dev/null; no descriptor of the parent's but 0-2 reaches the program.
// Throws std::runtime_error if the program is not found or cannot be
// executed (the message names it).
pid_t spawn(const std::vector<std::string>& argv, const SpawnOptions& options = {});

// Waits up to `timeout` for the child `pid` to end and reaps it. Returns its
// exit status, 128 + the signal number if a signal ended it, -1 on timeout
// (the child is left alone), -2 if `pid` is not a child of this process.
int wait_exit(pid_t pid, std::chrono::milliseconds timeout);

// Joins argv for messages: "redis-cli -p 1234 ping".
std::string join_args(const std::vector<std::string>& argv);

}  // namespace dlock::tools

#endif  // DLOCK_TOOLS_COMMON_SPAWN_HPP_

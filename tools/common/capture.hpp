// tools/common/capture.hpp: a program run to its end with its output
// captured (etcdctl's answers, openssl, the CLI under test).
//
//   auto r = dlock::tools::run({"openssl", "version"}, std::chrono::seconds(5));
//   if (r.exit_code == 0) use(r.out);
#ifndef DLOCK_TOOLS_COMMON_CAPTURE_HPP_
#define DLOCK_TOOLS_COMMON_CAPTURE_HPP_

#include <chrono>
#include <string>
#include <vector>

#include "common/spawn.hpp"

namespace dlock::tools {

struct RunResult {
  int exit_code = -1;  // as wait_exit; -1 if it was killed on timeout
  bool timed_out = false;
  std::string out;  // everything written to stdout
  std::string err;  // everything written to stderr
};

// Runs argv (as spawn, in its own process group) to completion, capturing
// stdout and stderr. After `timeout` the child's process group gets SIGKILL
// and timed_out is set. Throws std::runtime_error only if the program cannot
// be started.
RunResult run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout, const Env& env = {});

}  // namespace dlock::tools

#endif  // DLOCK_TOOLS_COMMON_CAPTURE_HPP_

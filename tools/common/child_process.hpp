// tools/common/child_process.hpp: child processes for the experiments (the
// inventory and order demos) and the verifier: start a program with its
// output in a log, stop it, kill it, run one to its end; free ports.
#ifndef DLOCK_TOOLS_COMMON_CHILD_PROCESS_HPP_
#define DLOCK_TOOLS_COMMON_CHILD_PROCESS_HPP_

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

#include "common/spawn.hpp"

namespace dlock::tools {

struct Child {
  pid_t pid = -1;
  int out_fd = -1;  // its stdout, when captured
};

// Starts argv[0] (searched in PATH) with stderr (and stdout, unless
// captured) appended to `log`, in this process's group (a terminal's
// Ctrl-C reaches it). Throws if it cannot be started (spawn).
Child start_child(const std::vector<std::string>& argv, bool capture_stdout, const std::string& log);
// `signal`, then SIGKILL after 5 s; reaps it. No-op for a child already
// gone.
void stop_child(Child& child, int signal = SIGTERM);
// SIGKILL and reap: a crash, as the experiments inject it. Both close the
// captured stdout. A child keeps no descriptor of the parent's but 0-2.
void kill_child(Child& child);
// True (and reaped, pid reset) once the child has exited; its status in
// *exit_code (128 + signal for a signal).
bool child_exited(Child& child, int* exit_code = nullptr);
// True while the child has not exited (an exited one is left to reap).
bool child_running(const Child& child);
// SIGSTOP to `pid`, returning once every one of its threads is stopped (at
// most `patience`): the signal takes effect asynchronously, and a server
// asked at once may still answer. false: it did not stop in time (or is gone).
bool stop_process(pid_t pid, std::chrono::milliseconds patience = std::chrono::milliseconds(2000));
// Runs a program to its end, its output appended to `log`; its exit status
// (128 + signal if killed), -1 if it was killed after `limit`.
int run_to_end(const std::vector<std::string>& argv, const std::string& log,
               std::chrono::seconds limit = std::chrono::hours(24));

// A free loopback port: the kernel's pick, released for a server to take
// (every test, tool and experiment asks here). Throws if there is none.
int free_port();
bool port_open(int port);
// Reads the "listening PORT" line a service prints once it accepts; throws
// if the line is something else.
int read_listening_port(int fd);

}  // namespace dlock::tools

#endif  // DLOCK_TOOLS_COMMON_CHILD_PROCESS_HPP_

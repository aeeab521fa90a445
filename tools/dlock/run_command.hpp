// CMD under the lock (`dlock run`): started in a process group of its own,
// with the terminal if dlock has it, and supervised until it ends: signals
// to dlock are passed on (job_control.hpp), and a lost lock ends it.
#ifndef DLOCK_TOOLS_DLOCK_RUN_COMMAND_HPP_
#define DLOCK_TOOLS_DLOCK_RUN_COMMAND_HPP_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dlock::cli {

struct Command {
  std::string lock_name;            // DLOCK_NAME, and for messages
  std::vector<std::string> argv;    // CMD and its arguments
  std::chrono::milliseconds grace;  // after a loss: SIGTERM, then SIGKILL this much later
  std::string grace_text;           // as the user wrote it
  bool quiet = false;               // print only errors
  // What is held, for messages: "the lock on" (dlock run), "the leadership
  // of" (dlock elect); the lock name follows.
  std::string held_as = "the lock on";
  // More variables for CMD's environment (DLOCK_TERM, DLOCK_ID).
  std::vector<std::pair<std::string, std::string>> env;
};

// CMD as dlock drives it.
struct Job {
  pid_t pid = -1;        // also its process group
  int tty = -1;          // the terminal CMD got as the foreground job, or -1
  bool stopped = false;  // as last reaped
};

// Forks and execs CMD with DLOCK_NAME, DLOCK_FENCE and `c.env` set, handing it the
// terminal `tty` (-1: none). Returns its pid, or -1 if it cannot fork. A CMD
// that cannot be executed is reported here and exits 126/127 in the child.
pid_t spawn_command(const Command& c, std::uint64_t fence, int tty);

// Runs CMD until it exits: signals read from `sig_fd` (a signalfd of
// handled_signals()) are passed on, and when `lost_fd` (an eventfd) fires,
// CMD gets SIGTERM and `lost` is set. Returns CMD's wait status.
int supervise(const Command& c, Job& job, int sig_fd, int lost_fd, bool& lost);

}  // namespace dlock::cli

#endif  // DLOCK_TOOLS_DLOCK_RUN_COMMAND_HPP_

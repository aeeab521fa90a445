// dlock run and dlock elect: CMD run while holding a lock (exclusive,
// fair, shared or one of N permits) or leading an election, and what
// happens when it is lost or a signal comes.
#ifndef DLOCK_TOOLS_DLOCK_LOCK_COMMAND_HPP_
#define DLOCK_TOOLS_DLOCK_LOCK_COMMAND_HPP_

#include <string>
#include <vector>

#include "cli_common.hpp"

namespace dlock::cli {

struct RunOptions {
  std::string name;
  std::vector<std::string> command;
  // The library's watchdog lease: one default, kept in LockOptions.
  std::string ttl = std::to_string(dlock::LockOptions{}.watchdog_lease.count()) + "ms";
  std::string wait;  // empty: forever
  std::string grace = "10s";
  bool ttl_given = false;  // --ttl on the command line
  // dlock run: the kind of lock. Default: exclusive (the write side of a
  // name that others hold --shared).
  bool fair = false;     // wait in line (LockOptions::fair)
  bool shared = false;   // a read lock (SharedMutex::lock_shared)
  std::string permits;   // --permits N: one permit of a Semaphore of N
  bool counted = false;  // --permits given
  // dlock elect: the candidate id (empty: hostname:pid).
  bool elect = false;
  std::string id;
  std::string label;  // dlock run --label: what status shows for CMD
};

// Connects, takes the lock (or leadership), runs CMD under it, releases
// it; CMD's exit status, or dlock's own (exit_codes.hpp).
int cmd_run(const Common& common, const RunOptions& o);

}  // namespace dlock::cli

#endif  // DLOCK_TOOLS_DLOCK_LOCK_COMMAND_HPP_

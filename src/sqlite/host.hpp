// Facts about this host that every process on it shares: a clock that never
// jumps, the boot, and whether a process is still the one that took a lock.
// The SQLite backend's leases and liveness rest on them (one host only).
#ifndef DLOCK_SQLITE_HOST_HPP_
#define DLOCK_SQLITE_HOST_HPP_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "dlock/error.hpp"

namespace dlock::sqlite {

// Milliseconds since boot on CLOCK_BOOTTIME: the same for every process on
// the host, never set, and counting through suspend (a lease runs out while
// the machine sleeps, as it would for a remote holder).
std::int64_t boot_ms();

// The kernel's id of this boot (/proc/sys/kernel/random/boot_id): a row
// written before a reboot is from another clock and holds nothing.
const std::string& boot_id();

// A process, told apart from a later one that reuses its pid by its start
// time; `ns` names its pid namespace (pids of another are not ours to check).
struct ProcessId {
  pid_t pid = 0;
  std::uint64_t start = 0;  // /proc/PID/stat field 22, clock ticks since boot
  std::string ns;           // /proc/PID/ns/pid, e.g. "pid:[4026531836]"
};

const ProcessId& self();

// The process is gone (or a zombie), or its pid now names another process.
// False when it cannot tell (another pid namespace): the lease decides then.
bool known_dead(const ProcessId& p);

// invalid_argument if `dir` is on a network or FUSE file system, where
// SQLite's file locking is not safe; unavailable if it cannot be examined.
Status check_local_fs(const std::string& dir);

}  // namespace dlock::sqlite

#endif  // DLOCK_SQLITE_HOST_HPP_

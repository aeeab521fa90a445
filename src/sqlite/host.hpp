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
// the machine sleeps, as it would for a remote holder). Read as the host's
// clock: a time namespace's offset (containers, CRIU) is taken off, so
// processes in different time namespaces compare the same instants.
std::int64_t boot_ms();

// invalid_argument if this process's boot clock cannot be put on the host's:
// it moved its children to another time namespace (unshare CLONE_NEWTIME)
// and /proc/self/timens_offsets describes theirs, not its own; or it is in
// a time namespace whose offsets it cannot read.
Status check_clock();

// The kernel's id of this boot (/proc/sys/kernel/random/boot_id): a row
// written before a reboot is from another clock and holds nothing.
const std::string& boot_id();

// A process, told apart from a later one that reuses its pid by its start
// time; `ns` names its pid namespace (pids of another are not ours to check).
// Empty `ns`: a process that could not name itself (its /proc belongs to
// another pid namespace): only its lease frees its locks.
struct ProcessId {
  pid_t pid = 0;
  std::uint64_t start = 0;  // /proc/PID/stat field 22, clock ticks since the host's boot
  std::string ns;           // /proc/self/ns/pid, e.g. "pid:[4026531836]"
};

// This process, read from /proc/self (never /proc/<getpid()>: in a pid
// namespace without its own /proc that names another process).
const ProcessId& self();

// Whether this process can check others by pid: its /proc shows its own
// pid namespace (so /proc/PID and pidfd_open(PID) mean the same process).
bool can_check_pids();

// The process is gone (or a zombie), or its pid now names another process.
// False when it cannot tell (another pid namespace, an unnamed holder, or a
// /proc of another namespace here): the lease decides then.
bool known_dead(const ProcessId& p);

// invalid_argument if `dir` is on a network or FUSE file system, where
// SQLite's file locking is not safe; unavailable if it cannot be examined.
Status check_local_fs(const std::string& dir);

// permission_denied if `path` is a symbolic link owned by another user than
// this process's (root excepted): its owner can point it elsewhere at any
// time, splitting processes between two lock tables (e.g. a link planted as
// /tmp/dlock-UID by someone else). Not a link, or missing: ok.
Status check_link_owner(const std::string& path);

}  // namespace dlock::sqlite

#endif  // DLOCK_SQLITE_HOST_HPP_

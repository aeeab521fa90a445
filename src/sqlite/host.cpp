#include "sqlite/host.hpp"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace dlock::sqlite {
namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string link_of(const char* path) {
  char buf[64];
  const ssize_t n = readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

// The boot clock's offset of this process's time namespace from the host's,
// from /proc/self/timens_offsets (absent before Linux 5.6: no offsets).
// That file shows the namespace of the process's future children: it is ours
// only while both are the same, which `known` records.
struct TimeNamespace {
  std::int64_t offset_ns = 0;
  bool known = true;
};

TimeNamespace read_time_namespace() {
  TimeNamespace t;
  const std::string ns = link_of("/proc/self/ns/time");
  if (ns != link_of("/proc/self/ns/time_for_children")) {
    t.known = false;
    return t;
  }
  std::ifstream in("/proc/self/timens_offsets");
  // Unreadable: fine only in the host's own time namespace (its inode
  // number is fixed, PROC_TIME_INIT_INO) or without time namespaces.
  if (!in) t.known = ns.empty() || ns == "time:[4026531834]";
  std::string clock;
  long long sec = 0, nsec = 0;
  while (in >> clock >> sec >> nsec)
    if (clock == "boottime") t.offset_ns = sec * 1000000000LL + nsec;
  return t;
}

// The pid /proc shows for this process: getpid() unless /proc belongs to an
// ancestor pid namespace (a pid namespace made without mounting its /proc).
pid_t proc_pid() {
  const std::string link = link_of("/proc/self");
  return link.empty() ? 0 : static_cast<pid_t>(std::stol(link));
}

// What this process knows of itself. Read again in a forked child: a child
// may be in new namespaces (unshare, then fork), and is another process.
// Within one process none of it changes (time offsets are fixed once a
// process is in the namespace; unshare moves only later children).
struct Identity {
  pid_t for_pid = 0;  // getpid() when read
  TimeNamespace time;
  bool can_check = false;
  ProcessId me;
};

bool read_stat(const std::string& path, const TimeNamespace& time, char& state, std::uint64_t& start);

const Identity& identity() {
  static std::atomic<Identity*> current{nullptr};
  Identity* id = current.load(std::memory_order_acquire);
  const pid_t pid = getpid();
  if (id != nullptr && id->for_pid == pid) return *id;
  // Once per process; an earlier process's copy is left behind (it may still
  // be referenced, and a fork leaves only one thread).
  auto* fresh = new Identity;
  fresh->for_pid = pid;
  fresh->time = read_time_namespace();
  fresh->can_check = proc_pid() == pid;
  fresh->me.pid = proc_pid();
  char state = 0;
  read_stat("/proc/self/stat", fresh->time, state, fresh->me.start);
  if (fresh->can_check) fresh->me.ns = link_of("/proc/self/ns/pid");
  // Threads that came first at once: one copy wins, the others go.
  Identity* seen = id;
  while (!current.compare_exchange_weak(seen, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) {
    if (seen != nullptr && seen->for_pid == pid) {
      delete fresh;
      return *seen;
    }
  }
  return *fresh;
}

// Field 3 (state) and field 22 (start time) of a stat file; the command
// name (field 2) is in parentheses and may hold spaces, so parse after it.
// The kernel shows the start time on the reader's boot clock: it is put back
// on the host's, as boot_ms() is.
bool read_stat(const std::string& path, const TimeNamespace& time, char& state, std::uint64_t& start) {
  const std::string line = read_first_line(path);
  const auto paren = line.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream rest(line.substr(paren + 1));
  rest >> state;
  std::string skip;
  for (int field = 4; field < 22; ++field) rest >> skip;
  if (!(rest >> start)) return false;
  static const std::int64_t hz = sysconf(_SC_CLK_TCK);
  const std::int64_t off = time.offset_ns;
  start -= static_cast<std::uint64_t>(off / 1000000000LL * hz + off % 1000000000LL * hz / 1000000000LL);
  return true;
}

bool read_stat(pid_t pid, char& state, std::uint64_t& start) {
  return read_stat("/proc/" + std::to_string(pid) + "/stat", identity().time, state, start);
}

}  // namespace

std::int64_t boot_ms() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  const std::int64_t ns = static_cast<std::int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
  return (ns - identity().time.offset_ns) / 1000000;
}

Status check_clock() {
  if (identity().time.known) return {};
  return {Errc::invalid_argument,
          "this process's time namespace offsets are unknown (its children are in another time namespace, or "
          "/proc/self/timens_offsets cannot be read), so its boot clock cannot be compared with other processes': "
          "open the lock file before unshare(CLONE_NEWTIME), or in the child"};
}

const std::string& boot_id() {
  static const std::string id = read_first_line("/proc/sys/kernel/random/boot_id");
  return id;
}

bool can_check_pids() { return identity().can_check; }

const ProcessId& self() { return identity().me; }

bool known_dead(const ProcessId& p) {
  const ProcessId& me = self();
  if (!can_check_pids() || p.pid <= 0 || p.ns.empty() || p.ns != me.ns) return false;
  if (p.pid == me.pid) return p.start != me.start;  // this process, or one before it with its pid
  char state = 0;
  std::uint64_t start = 0;
  if (!read_stat(p.pid, state, start)) return true;  // no such process
  // One tick of slack: offsets in fractions of a tick round either way. A
  // pid comes back only after the pid space wraps, never within a tick.
  const auto apart = start > p.start ? start - p.start : p.start - start;
  return state == 'Z' || state == 'X' || apart > 1;
}

Status check_local_fs(const std::string& dir) {
  struct statfs fs {};
  if (statfs(dir.c_str(), &fs) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return {Errc::invalid_argument, "no directory " + dir + " for the lock file"};
    return {Errc::unavailable, "cannot examine " + dir + ": " + std::strerror(errno)};
  }
  struct Remote {
    unsigned long magic;
    const char* name;
  };
  static constexpr Remote kRemote[] = {
      {0x6969, "NFS"},      {0x517B, "SMB"},      {0xFE534D42, "SMB2"},   {0xFF534D42, "CIFS"},
      {0x65735546, "FUSE"}, {0x01021997, "9P"},   {0x00C36400, "Ceph"},   {0x5346414F, "AFS"},
      {0x6B414653, "kAFS"}, {0x47504653, "GPFS"}, {0x0BD00BD0, "Lustre"},
  };
  for (const Remote& r : kRemote)
    if (static_cast<unsigned long>(fs.f_type) == r.magic)
      return {Errc::invalid_argument, dir + " is on " + r.name +
                                          ": SQLite's file locking is not safe on network file systems; "
                                          "put the database on a local disk, or use a server (redis://, postgres://)"};
  return {};
}

Status check_link_owner(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return {};
  if (st.st_uid == geteuid() || st.st_uid == 0) return {};
  return {Errc::permission_denied, path + " is a symbolic link of another user (uid " + std::to_string(st.st_uid) +
                                       "), who could point it at another lock file at any time: use the real path"};
}

}  // namespace dlock::sqlite

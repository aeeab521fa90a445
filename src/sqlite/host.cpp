#include "sqlite/host.hpp"

#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

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

std::string pid_ns(pid_t pid) {
  char buf[64];
  const std::string path = "/proc/" + std::to_string(pid) + "/ns/pid";
  const ssize_t n = readlink(path.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

// Field 3 (state) and field 22 (start time) of /proc/PID/stat; the command
// name (field 2) is in parentheses and may hold spaces, so parse after it.
bool read_stat(pid_t pid, char& state, std::uint64_t& start) {
  const std::string line = read_first_line("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = line.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream rest(line.substr(paren + 1));
  rest >> state;
  std::string skip;
  for (int field = 4; field < 22; ++field) rest >> skip;
  return static_cast<bool>(rest >> start);
}

}  // namespace

std::int64_t boot_ms() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

const std::string& boot_id() {
  static const std::string id = read_first_line("/proc/sys/kernel/random/boot_id");
  return id;
}

const ProcessId& self() {
  static const ProcessId me = [] {
    ProcessId p;
    p.pid = getpid();
    char state = 0;
    read_stat(p.pid, state, p.start);
    p.ns = pid_ns(p.pid);
    return p;
  }();
  return me;
}

bool known_dead(const ProcessId& p) {
  const ProcessId& me = self();
  if (p.pid <= 0 || p.ns.empty() || p.ns != me.ns) return false;
  if (p.pid == me.pid) return p.start != me.start;  // this process, or one before it with its pid
  char state = 0;
  std::uint64_t start = 0;
  if (!read_stat(p.pid, state, start)) return true;  // no such process
  return state == 'Z' || state == 'X' || start != p.start;
}

Status check_local_fs(const std::string& dir) {
  struct statfs fs {};
  if (statfs(dir.c_str(), &fs) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return {Errc::invalid_argument, "no directory " + dir + " for the lock file"};
    return {Errc::unavailable, "cannot examine " + dir + ": " + std::strerror(errno)};
  }
  struct Remote {
    unsigned long magic;
    const char* name;
  };
  static constexpr Remote kRemote[] = {
      {0x6969, "NFS"},           {0x517B, "SMB"},       {0xFE534D42, "SMB2"}, {0xFF534D42, "CIFS"},
      {0x65735546, "FUSE"},      {0x01021997, "9P"},    {0x00C36400, "Ceph"}, {0x5346414F, "AFS"},
      {0x6B414653, "kAFS"},      {0x47504653, "GPFS"},  {0x0BD00BD0, "Lustre"},
  };
  for (const Remote& r : kRemote)
    if (static_cast<unsigned long>(fs.f_type) == r.magic)
      return {Errc::invalid_argument, dir + " is on " + r.name +
                                          ": SQLite's file locking is not safe on network file systems; "
                                          "put the database on a local disk, or use a server (redis://, postgres://)"};
  return {};
}

}  // namespace dlock::sqlite

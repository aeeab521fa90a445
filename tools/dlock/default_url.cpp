#include "default_url.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace dlock::cli {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] == '/' ? v : "";  // relative ones are ignored, as the XDG spec says
}

std::string default_dir() {
  if (auto state = env("XDG_STATE_HOME"); !state.empty()) return state + "/dlock";
  if (auto home = env("HOME"); !home.empty()) return home + "/.local/state/dlock";
  return "/tmp/dlock-" + std::to_string(getuid());
}

}  // namespace

std::string default_db_path() { return default_dir() + "/locks.db"; }

std::string default_url() { return "sqlite://" + default_db_path(); }

std::string prepare_default_dir() {
#if !DLOCK_WITH_SQLITE
  // The default store is a SQLite file, which this build cannot open.
  return "this dlock is built without SQLite (DLOCK_WITH_SQLITE=OFF), so it has no default lock store: give "
         "--url or set DLOCK_URL";
#endif
  const std::string dir = default_dir();
  // Each missing parent, then the directory itself private to the user.
  for (std::size_t end = dir.find('/', 1);; end = dir.find('/', end + 1)) {
    const std::string part = dir.substr(0, end);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return "cannot create " + part + ": " + std::strerror(errno);
    if (end == std::string::npos) break;
  }
  // Without HOME the directory is in /tmp, where another user may have
  // planted a symbolic link to a directory of the user's own (stat alone
  // follows it): the link itself must be the user's too.
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) return "cannot use " + dir + ": " + std::strerror(errno);
  if (S_ISLNK(st.st_mode) && st.st_uid != getuid())
    return dir + " is a symbolic link of another user; set DLOCK_URL or --url";
  if (stat(dir.c_str(), &st) != 0) return "cannot use " + dir + ": " + std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return dir + " is not a directory; set DLOCK_URL or --url";
  if (st.st_uid != getuid()) return dir + " belongs to another user; set DLOCK_URL or --url";
  return {};
}

}  // namespace dlock::cli

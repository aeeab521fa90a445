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
  const std::string dir = default_dir();
  // Each missing parent, then the directory itself private to the user.
  for (std::size_t end = dir.find('/', 1);; end = dir.find('/', end + 1)) {
    const std::string part = dir.substr(0, end);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)
      return "cannot create " + part + ": " + std::strerror(errno);
    if (end == std::string::npos) break;
  }
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) return "cannot use " + dir + ": " + std::strerror(errno);
  if (st.st_uid != getuid()) return dir + " belongs to another user; set DLOCK_URL or --url";
  return {};
}

}  // namespace dlock::cli

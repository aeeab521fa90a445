// tests/support/temp_dir.hpp: a private directory under $TMPDIR (or /tmp),
// removed with everything in it when the object goes.
#ifndef DLOCK_TESTS_SUPPORT_TEMP_DIR_HPP_
#define DLOCK_TESTS_SUPPORT_TEMP_DIR_HPP_

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace dlock::test {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dlock-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp(" + tmpl + "): " + std::strerror(errno));
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace dlock::test

#endif  // DLOCK_TESTS_SUPPORT_TEMP_DIR_HPP_

#include "clock_control.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

namespace torture {

namespace {
[[noreturn]] void fail(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), "ClockControl: " + what);
}
}  // namespace

ClockControl::ClockControl(std::string path) : path_(std::move(path)) {
  // Rewritten in place, never replaced: the shim maps this inode.
  const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create " + path_);
  const std::int64_t zero = 0;
  if (::pwrite(fd, &zero, sizeof zero, 0) != static_cast<ssize_t>(sizeof zero)) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    fail("cannot write " + path_);
  }
  void* p = ::mmap(nullptr, sizeof(std::int64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int saved = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    errno = saved;
    fail("cannot map " + path_);
  }
  value_ = static_cast<std::int64_t*>(p);
}

ClockControl::~ClockControl() {
  if (value_ != nullptr) ::munmap(value_, sizeof(std::int64_t));
}

void ClockControl::set_offset(std::chrono::milliseconds offset) {
  // Same physical page as the shim's read-only mapping; the kernel writes it
  // back to the file on its own.
  __atomic_store_n(value_, static_cast<std::int64_t>(offset.count()), __ATOMIC_RELAXED);
}

std::chrono::milliseconds ClockControl::offset() const {
  return std::chrono::milliseconds(__atomic_load_n(value_, __ATOMIC_RELAXED));
}

}  // namespace torture

#include "slots.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "history.hpp"

namespace torture {

SlotTable::SlotTable(const std::string& path, int n, bool create) : n_(n) {
  const int fd = ::open(path.c_str(), create ? (O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC) : (O_RDWR | O_CLOEXEC), 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  const auto bytes = static_cast<size_t>(n) * sizeof(Slot);
  if (create && ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot size " + path);
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw std::runtime_error("cannot map " + path + ": " + std::strerror(errno));
  slots_ = static_cast<Slot*>(p);  // a zeroed file is a table of idle slots
}

SlotTable::~SlotTable() { ::munmap(slots_, static_cast<size_t>(n_) * sizeof(Slot)); }

// The phase first: a reader that sees the old phase then sees its old time,
// never the next phase's (a holder leaving its hold would otherwise look
// freshly granted to holder_granted_after).
void set_phase(Slot& s, Phase p) noexcept {
  const auto now = mono_ns();
  s.phase.store(static_cast<std::int32_t>(p));
  s.since_ns.store(now);
}

}  // namespace torture

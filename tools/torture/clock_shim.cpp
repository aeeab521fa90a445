// LD_PRELOAD clock shim: shifts the wall clock of one process (section 8.1 of
// the correctness test plan). libfaketime cannot be used on Debian's
// redis-server: it finds the real functions with dlsym, which allocates, and
// jemalloc calls clock_gettime while initialising -> endless recursion.
// So this shim never calls dlsym and never allocates: the real time comes
// from the raw syscall.
//
//   DLOCK_CLOCK_SHIM_FILE=/run/dir/clock LD_PRELOAD=libdlock_clock_shim.so redis-server ...
//
// The file holds one native-endian int64: the offset in milliseconds, added
// to CLOCK_REALTIME, CLOCK_REALTIME_COARSE, gettimeofday() and time(). It is
// mapped MAP_SHARED at load time, so a rewrite of those 8 bytes in place
// (torture::ClockControl) jumps the clock of the running process. Unset,
// missing or short file: offset 0. Monotonic clocks are never shifted.
//
// Limitation: code reading the vDSO directly, not through libc's symbols, is
// unaffected (redis-server 7.0 is affected, checked).
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace {

// Set once by the constructor, before any other thread exists; until then
// (other libraries' constructors) the offset is 0.
const int64_t* g_offset_ms = nullptr;

__attribute__((constructor)) void map_offset_file() {
  const char* path = getenv("DLOCK_CLOCK_SHIM_FILE");
  if (path == nullptr || *path == '\0') return;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  // A shorter file would raise SIGBUS on the first read.
  if (fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(sizeof(int64_t))) {
    void* p = mmap(nullptr, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) g_offset_ms = static_cast<const int64_t*>(p);
  }
  close(fd);  // the mapping stays valid
}

int64_t offset_ms() {
  // Page-aligned, so the 8-byte load is atomic; relaxed is enough because
  // nothing else is published through it.
  return g_offset_ms != nullptr ? __atomic_load_n(g_offset_ms, __ATOMIC_RELAXED) : 0;
}

int real_clock_gettime(clockid_t clk, struct timespec* ts) {
  return static_cast<int>(syscall(SYS_clock_gettime, clk, ts));
}

void shift(struct timespec* ts) {
  const int64_t off = offset_ms();
  if (off == 0) return;
  int64_t sec = ts->tv_sec + off / 1000;
  int64_t nsec = ts->tv_nsec + (off % 1000) * 1000000;  // in (-2e9, 2e9)
  if (nsec >= 1000000000) {
    nsec -= 1000000000;
    ++sec;
  } else if (nsec < 0) {
    nsec += 1000000000;
    --sec;
  }
  ts->tv_sec = static_cast<time_t>(sec);
  ts->tv_nsec = static_cast<long>(nsec);
}

}  // namespace

extern "C" {

// Declared here, not via <sys/time.h>, whose nonnull attribute would let the
// compiler drop the tv == nullptr check below.
int gettimeofday(struct timeval* tv, void* tz) noexcept;

__attribute__((visibility("default"))) int clock_gettime(clockid_t clk, struct timespec* ts) noexcept {
  const int rc = real_clock_gettime(clk, ts);  // fails (EFAULT, EINVAL) before ts is used
  if (rc == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) shift(ts);
  return rc;
}

__attribute__((visibility("default"))) int gettimeofday(struct timeval* tv, void* tz) noexcept {
  if (tz != nullptr) {  // struct timezone: two ints, always zero on Linux
    int* z = static_cast<int*>(tz);
    z[0] = 0;
    z[1] = 0;
  }
  if (tv == nullptr) return 0;
  struct timespec ts;
  const int rc = real_clock_gettime(CLOCK_REALTIME, &ts);
  if (rc != 0) return rc;
  shift(&ts);
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = static_cast<suseconds_t>(ts.tv_nsec / 1000);
  return 0;
}

__attribute__((visibility("default"))) time_t time(time_t* out) noexcept {
  struct timespec ts;
  if (real_clock_gettime(CLOCK_REALTIME, &ts) != 0) return static_cast<time_t>(-1);
  shift(&ts);
  if (out != nullptr) *out = ts.tv_sec;
  return ts.tv_sec;
}

}  // extern "C"

// The orchestrator's side of the clock shim (clock_shim.cpp): owns the 8-byte
// offset file that shimmed processes map, and jumps their wall clocks.
//
//   torture::ClockControl clock(run_dir + "/server.clock");   // offset 0
//   spawn redis-server with DLOCK_CLOCK_SHIM_FILE=clock.path() and
//     LD_PRELOAD=<libdlock_clock_shim.so>
//   clock.set_offset(std::chrono::seconds(60));   // the server's time jumps now
//
// The file is written through a shared mapping with one atomic 8-byte store,
// so a reader never sees half an offset. The file is left in place when the
// object goes (it is evidence; processes still running keep their mapping).
#ifndef DLOCK_TORTURE_CLOCK_CONTROL_HPP_
#define DLOCK_TORTURE_CLOCK_CONTROL_HPP_

#include <chrono>
#include <cstdint>
#include <string>

namespace torture {

class ClockControl {
 public:
  // Creates (or truncates) the file with offset 0. Throws std::system_error.
  explicit ClockControl(std::string path);
  ~ClockControl();
  ClockControl(const ClockControl&) = delete;
  ClockControl& operator=(const ClockControl&) = delete;

  // Thread-safe; takes effect in every shimmed process at once.
  void set_offset(std::chrono::milliseconds offset);
  std::chrono::milliseconds offset() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::int64_t* value_ = nullptr;  // the shared mapping of the file
};

}  // namespace torture

#endif  // DLOCK_TORTURE_CLOCK_CONTROL_HPP_

// The verifier's history: one JSON object per line, one file per process,
// every time taken from the host's CLOCK_MONOTONIC (shared by all processes
// on one machine, so intervals from different processes compare exactly).
//
// Fields of a line (absent when not applicable):
//   t       nanoseconds on CLOCK_MONOTONIC
//   proc    "w0".."wN" for workers, "nemesis" for the fault injector,
//           "verifier" for set-up and final reads
//   inc     incarnation of the worker (1, then +1 after every restart)
//   pid     OS process id
//   op      acquire | release | read | fenced_write | unfenced_write |
//           counter_write | lost | failpoint | fault | heal | final
//   phase   invoke | ok | fail | info     (info = outcome unknown)
//   grant   id of one grant: "<proc>/<inc>/<n>"; every op done under that
//           grant carries it
//   fence   fencing token of the grant (0 = the strategy has none)
//   value   read or written value
//   seq     the resource server's order of a register write
//   target  the proc or "server" a fault hits
//   kind    fault kind (see faults in scenario.hpp), failpoint name
//   detail  free text: error message, proof that a fault took effect
#ifndef DLOCK_TORTURE_HISTORY_HPP_
#define DLOCK_TORTURE_HISTORY_HPP_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace torture {

struct Event {
  std::int64_t t = 0;
  std::string proc;
  int inc = 0;
  int pid = 0;
  std::string op;
  std::string phase;
  std::string grant;
  std::optional<std::uint64_t> fence;
  std::optional<std::int64_t> value;
  std::optional<std::int64_t> seq;
  std::string target;
  std::string kind;
  std::string detail;
};

// CLOCK_MONOTONIC in nanoseconds.
std::int64_t mono_ns() noexcept;
// The wall clock in milliseconds, through gettimeofday(2): what the naive
// strategies judge expiry by, and what the clock shim shifts.
std::int64_t wall_ms() noexcept;

std::string to_json_line(const Event& e);       // no trailing newline
Event from_json_line(const std::string& line);  // throws std::runtime_error

// Appends events to a file with one write(2) per line, so a line is never
// torn even when the process is killed, and several threads may log.
class HistoryWriter {
 public:
  explicit HistoryWriter(const std::string& path);  // throws on error
  ~HistoryWriter();
  HistoryWriter(const HistoryWriter&) = delete;
  HistoryWriter& operator=(const HistoryWriter&) = delete;
  void write(const Event& e) noexcept;

 private:
  int fd_;
};

// Every *.jsonl file in `dir`, merged and sorted by t (stable). A torn last
// line of a killed process is skipped.
std::vector<Event> read_history_dir(const std::string& dir);

}  // namespace torture

#endif  // DLOCK_TORTURE_HISTORY_HPP_

// A few bytes of shared memory per worker, mapped from a file in the run
// directory: each worker publishes what it is doing so the nemesis can aim
// its faults (pause *the holder*, delay replies to *an acquirer*).
#ifndef DLOCK_TORTURE_SLOTS_HPP_
#define DLOCK_TORTURE_SLOTS_HPP_

#include <atomic>
#include <cstdint>
#include <string>

namespace torture {

enum class Phase : std::int32_t { idle = 0, acquiring = 1, holding = 2, releasing = 3 };

struct alignas(64) Slot {
  std::atomic<std::int32_t> pid;
  std::atomic<std::int32_t> phase;
  std::atomic<std::int64_t> since_ns;  // CLOCK_MONOTONIC when phase was set
  std::atomic<std::int64_t> grants;
  std::atomic<std::int32_t> child_pid;  // a strategy's own process (dlock run), 0: none
};
static_assert(std::atomic<std::int64_t>::is_always_lock_free);

class SlotTable {
 public:
  // create: make the file (zeroed) for n slots; otherwise map an existing one.
  SlotTable(const std::string& path, int n, bool create);
  ~SlotTable();
  SlotTable(const SlotTable&) = delete;
  SlotTable& operator=(const SlotTable&) = delete;
  Slot& at(int i) { return slots_[i]; }
  int size() const { return n_; }

 private:
  Slot* slots_ = nullptr;
  int n_ = 0;
};

void set_phase(Slot& s, Phase p) noexcept;

}  // namespace torture

#endif  // DLOCK_TORTURE_SLOTS_HPP_

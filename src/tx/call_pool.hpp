// Threads for the branch calls a transaction makes at once (Tries in
// parallel, phase two's Confirms or Cancels): kept for the next batch
// instead of started per call, as many as the most calls ever in flight
// at once beside their callers.
#ifndef DLOCK_TX_CALL_POOL_HPP_
#define DLOCK_TX_CALL_POOL_HPP_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dlock::tx::detail {

class CallPool {
 public:
  CallPool() = default;
  CallPool(const CallPool&) = delete;
  CallPool& operator=(const CallPool&) = delete;
  // Joins the threads. No run_all() may be in flight.
  ~CallPool();

  // Runs every job, the first on this thread and the others on the
  // pool's, and returns once each has returned. Jobs must not throw. When
  // no thread can be started, the rest run here, one after the other.
  void run_all(std::vector<std::function<void()>>& jobs);

 private:
  void work();

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;  // under mu_
  std::size_t running_ = 0;                  // threads in a job, under mu_
  bool stop_ = false;                        // under mu_
  std::vector<std::thread> threads_;         // under mu_
};

}  // namespace dlock::tx::detail

#endif  // DLOCK_TX_CALL_POOL_HPP_

// Hands one result from the client's I/O thread to a blocked caller, which
// sleeps on a futex (std::atomic::wait). It does not spin: on a busy machine
// spinning takes the time slices the server and the I/O thread need. The
// common blocking calls do not come through here at all (the fast path runs
// them on the caller's thread).
#ifndef DLOCK_SYNC_WAIT_HPP_
#define DLOCK_SYNC_WAIT_HPP_

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

namespace dlock::detail {

template <class T>
class SyncWait {
 public:
  // The callback to give the asynchronous call; it may outlive *this only
  // if the caller gave up waiting, which it never does.
  auto setter() {
    return [s = state_](T value) {
      s->value.emplace(std::move(value));
      s->ready.store(true, std::memory_order_release);
      s->ready.notify_one();
    };
  }

  T wait() {
    while (!state_->ready.load(std::memory_order_acquire)) state_->ready.wait(false, std::memory_order_acquire);
    return std::move(*state_->value);
  }

 private:
  struct State {
    std::atomic<bool> ready{false};
    std::optional<T> value;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace dlock::detail

#endif  // DLOCK_SYNC_WAIT_HPP_

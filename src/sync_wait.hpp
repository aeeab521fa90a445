// Hands one result from the client's I/O thread to a blocked caller.
//
// The caller first spins for a short while, yielding the CPU on each turn,
// and only then sleeps on a futex (std::atomic::wait). A lock round trip on
// loopback takes tens of microseconds; waking a sleeping thread costs about
// as much again, and spinning with sched_yield leaves the core to the I/O
// thread and the server when they need it (this matters on small machines).
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
    using Clock = std::chrono::steady_clock;
    const auto spin_until = Clock::now() + std::chrono::microseconds(200);
    while (!state_->ready.load(std::memory_order_acquire)) {
      if (Clock::now() < spin_until) {
        std::this_thread::yield();
      } else {
        state_->ready.wait(false, std::memory_order_acquire);
      }
    }
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

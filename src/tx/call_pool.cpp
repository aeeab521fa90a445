#include "tx/call_pool.hpp"

#include <latch>

namespace dlock::tx::detail {

CallPool::~CallPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  ready_.notify_all();
  for (auto& t : threads_) t.join();
}

void CallPool::run_all(std::vector<std::function<void()>>& jobs) {
  if (jobs.empty()) return;
  std::latch left(static_cast<std::ptrdiff_t>(jobs.size() - 1));
  std::vector<std::size_t> here{0};  // jobs run on this thread
  {
    std::lock_guard lock(mu_);
    for (std::size_t i = 1; i < jobs.size(); ++i) {
      // Each queued job needs a thread that is neither in a job nor
      // promised to one queued before it.
      if (threads_.size() <= running_ + queue_.size()) {
        try {
          threads_.emplace_back([this] { work(); });
        } catch (...) {  // no thread to be had: run it here
          here.push_back(i);
          continue;
        }
      }
      queue_.emplace_back([&left, &job = jobs[i]] {
        job();
        left.count_down();
      });
    }
  }
  ready_.notify_all();
  for (std::size_t i : here) {
    jobs[i]();
    if (i != 0) left.count_down();
  }
  left.wait();
}

void CallPool::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    ready_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping
    auto job = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    job();
    lock.lock();
    --running_;
  }
}

}  // namespace dlock::tx::detail

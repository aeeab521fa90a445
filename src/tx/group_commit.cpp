#include "tx/group_commit.hpp"

#include <algorithm>
#include <utility>

namespace dlock::tx::detail {

Result<postgres::Rows> GroupCommit::write(const Write& w) {
  Entry e{&w};
  std::unique_lock lock(mu_);
  queue_.push_back(&e);
  while (!e.done) {
    // The oldest write waiting leads the next batch once a slot is free.
    if (flying_ < in_flight_ && queue_.front() == &e) {
      lead(lock);
    } else if (e.taken || w.by == Clock::time_point::max()) {
      e.wake.wait(lock);
    } else if (e.wake.wait_until(lock, w.by) == std::cv_status::timeout && !e.taken && !e.done) {
      queue_.erase(std::find(queue_.begin(), queue_.end(), &e));
      wake_oldest();  // another may be the oldest now
      return Status(Errc::timeout, "the log's write was not sent by its deadline (the batch before it was in flight)");
    }
  }
  lock.unlock();
  if (e.alone) return one_(w);
  return std::move(e.result);
}

void GroupCommit::lead(std::unique_lock<std::mutex>& lock) {
  std::vector<Entry*> entries;
  while (!queue_.empty() && entries.size() < max_batch_) {
    entries.push_back(queue_.front());
    entries.back()->taken = true;
    queue_.pop_front();
  }
  ++flying_;
  // The next oldest may lead a batch of its own beside this one.
  if (flying_ < in_flight_) wake_oldest();
  lock.unlock();
  std::vector<const Write*> writes;
  Clock::time_point by = Clock::time_point::max();
  for (auto* e : entries) {
    writes.push_back(e->write);
    by = std::min(by, e->write->by);
  }
  if (entries.size() == 1) {
    entries[0]->result = one_(*writes[0]);
  } else {
    auto r = batch_(writes, by);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (r.ok())
        entries[i]->result = std::move((*r)[i]);
      else if (r.code() == Errc::aborted)
        entries[i]->alone = true;
      else
        entries[i]->result = r.status();
    }
  }
  lock.lock();
  --flying_;
  ++batches_;
  batched_writes_ += entries.size();
  for (auto* e : entries) {
    e->done = true;
    e->wake.notify_one();
  }
  wake_oldest();
}

std::size_t GroupCommit::batches() const {
  std::lock_guard lock(mu_);
  return batches_;
}

std::size_t GroupCommit::waiting() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

std::size_t GroupCommit::batched_writes() const {
  std::lock_guard lock(mu_);
  return batched_writes_;
}

}  // namespace dlock::tx::detail

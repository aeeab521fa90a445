// Waits for a batch of ZooKeeper C-client completions (the benchmarks'
// limits send requests pipelined, as dlock does, and wait for all of them).
#ifndef DLOCK_BENCH_ZK_BATCH_HPP_
#define DLOCK_BENCH_ZK_BATCH_HPP_

#include <zookeeper/zookeeper.h>

#include <condition_variable>
#include <mutex>
#include <string>

namespace dlock::bench {

struct ZkBatch {
  std::mutex mu;
  std::condition_variable cv;
  int left = 0;
  int rc = ZOK;
  std::string node;  // the queue node created
  void arm(int n) {
    std::lock_guard lk(mu);
    left = n;
    rc = ZOK;
  }
  void done(int r, bool check) {
    std::lock_guard lk(mu);
    if (check && r != ZOK) rc = r;
    if (--left == 0) cv.notify_one();
  }
  int wait() {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return left == 0; });
    return rc;
  }
  static ZkBatch* of(const void* d) { return static_cast<ZkBatch*>(const_cast<void*>(d)); }
};

}  // namespace dlock::bench

#endif  // DLOCK_BENCH_ZK_BATCH_HPP_

// The thread that keeps one etcd lease alive: a keep-alive every third of
// its TTL (the leader answers it; a follower forwards it), each answer
// handed to `kept` with the time its request was sent, since the leader
// extended the lease no earlier than that. Each keep-alive is a stream of
// its own that ends within a third of the TTL: one sent to a frozen member
// is given up in time for the next to go to another (the channel takes the
// members in turn). A failure is told to `broken` and tried again after a
// pause; whether the lease outlived the gap is for the caller's deadline to
// say, not for this thread.
#ifndef DLOCK_ETCD_LEASE_KEEPER_HPP_
#define DLOCK_ETCD_LEASE_KEEPER_HPP_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "etcd/etcd_rpc.hpp"

namespace dlock::etcd {

class LeaseKeeper {
 public:
  struct Handlers {
    // The leader answered a keep-alive of `lease` sent at `sent_at`: the
    // seconds left on it (0 or less: the lease is gone). Any thread.
    std::function<void(std::int64_t lease, Clock::time_point sent_at, std::int64_t ttl_seconds)> kept;
    // The stream broke (it is made again); any thread.
    std::function<void(std::int64_t lease, const Status& why)> broken;
  };
  LeaseKeeper(EtcdRpc& rpc, Handlers handlers);
  ~LeaseKeeper();  // stop()
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Keeps `lease` (of `ttl`) alive from now on, instead of any before: the
  // first keep-alive goes out after a third of `ttl`. A keep-alive still
  // waiting for the earlier lease's answer is cancelled.
  void keep(std::int64_t lease, std::chrono::seconds ttl);
  // Ends the thread; a keep-alive waiting for its answer is cancelled.
  void stop();

 private:
  void run();

  EtcdRpc& rpc_;
  Handlers handlers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::int64_t lease_ = 0;                // under mu_; 0: none
  std::chrono::seconds ttl_{0};           // under mu_
  bool stopping_ = false;                 // under mu_
  EtcdRpc::KeepAlive* stream_ = nullptr;  // under mu_: the one in use, for stop()
  std::thread thread_;
};

}  // namespace dlock::etcd

#endif  // DLOCK_ETCD_LEASE_KEEPER_HPP_

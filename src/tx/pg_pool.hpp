// Idle PostgreSQL connections kept for reuse, for the transaction log and
// the 2PC participants: concurrent transactions write on connections of
// their own (the server commits them together) instead of queueing on one.
#ifndef DLOCK_TX_PG_POOL_HPP_
#define DLOCK_TX_PG_POOL_HPP_

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "postgres/pg_blocking.hpp"

namespace dlock::tx::detail {

class PgPool {
 public:
  // max_open: connections open at once, idle ones included (0: no bound);
  // a caller finding none free waits for one. The bound keeps a burst of
  // transactions within the server's max_connections: each use is one
  // statement, so the wait is short.
  explicit PgPool(postgres::PgConfig config, std::size_t max_open = 0, std::size_t max_idle = 16)
      : config_(std::move(config)), max_open_(max_open), max_idle_(max_idle) {}

  // A connection for one caller; back to the pool when it goes, if it is
  // connected with no transaction open (one in doubt or broken closes, and
  // its transaction rolls back with it).
  class Conn {
   public:
    Conn(PgPool* pool, std::unique_ptr<postgres::PgBlocking> c) : pool_(pool), c_(std::move(c)) {}
    Conn(Conn&& other) noexcept : pool_(other.pool_), c_(std::move(other.c_)) {}
    Conn& operator=(Conn&&) = delete;
    ~Conn() {
      if (c_) pool_->release(std::move(c_));
    }
    postgres::PgBlocking* operator->() const { return c_.get(); }

   private:
    PgPool* pool_;
    std::unique_ptr<postgres::PgBlocking> c_;
  };

  Conn take() {
    std::unique_lock lock(mu_);
    free_.wait(lock, [&] { return !idle_.empty() || max_open_ == 0 || open_ < max_open_; });
    if (idle_.empty()) {
      ++open_;
      return {this, std::make_unique<postgres::PgBlocking>(config_)};
    }
    Conn c{this, std::move(idle_.back())};
    idle_.pop_back();
    return c;
  }

 private:
  void release(std::unique_ptr<postgres::PgBlocking> c) {
    {
      std::lock_guard lock(mu_);
      if (c->idle() && idle_.size() < max_idle_) {
        idle_.push_back(std::move(c));
      } else {
        --open_;
      }
    }
    free_.notify_one();
    // `c`, if not kept, closes here, outside the lock.
  }

  postgres::PgConfig config_;
  std::size_t max_open_, max_idle_;
  std::mutex mu_;
  std::condition_variable free_;
  std::size_t open_ = 0;                                     // under mu_
  std::vector<std::unique_ptr<postgres::PgBlocking>> idle_;  // under mu_
};

}  // namespace dlock::tx::detail

#endif  // DLOCK_TX_PG_POOL_HPP_

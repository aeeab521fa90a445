// Idle PostgreSQL connections kept for reuse, for the transaction log and
// the 2PC participants: concurrent transactions write on connections of
// their own (the server commits them together) instead of queueing on one.
#ifndef DLOCK_TX_PG_POOL_HPP_
#define DLOCK_TX_PG_POOL_HPP_

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "postgres/pg_blocking.hpp"

namespace dlock::tx::detail {

class PgPool {
 public:
  explicit PgPool(postgres::PgConfig config, std::size_t max_idle = 16)
      : config_(std::move(config)), max_idle_(max_idle) {}

  // A connection for one caller; back to the pool when it goes, if it is
  // connected with no transaction open (one in doubt or broken closes, and
  // its transaction rolls back with it).
  class Conn {
   public:
    Conn(PgPool* pool, std::unique_ptr<postgres::PgBlocking> c) : pool_(pool), c_(std::move(c)) {}
    Conn(Conn&&) noexcept = default;
    Conn& operator=(Conn&&) = delete;
    ~Conn() {
      if (c_ && c_->idle()) pool_->give_back(std::move(c_));
    }
    postgres::PgBlocking* operator->() const { return c_.get(); }

   private:
    PgPool* pool_;
    std::unique_ptr<postgres::PgBlocking> c_;
  };

  Conn take() {
    std::lock_guard lock(mu_);
    if (idle_.empty()) return {this, std::make_unique<postgres::PgBlocking>(config_)};
    Conn c{this, std::move(idle_.back())};
    idle_.pop_back();
    return c;
  }

  const postgres::PgConfig& config() const { return config_; }

 private:
  void give_back(std::unique_ptr<postgres::PgBlocking> c) {
    std::lock_guard lock(mu_);
    if (idle_.size() < max_idle_) idle_.push_back(std::move(c));
  }

  postgres::PgConfig config_;
  std::size_t max_idle_;
  std::mutex mu_;
  std::vector<std::unique_ptr<postgres::PgBlocking>> idle_;  // under mu_
};

}  // namespace dlock::tx::detail

#endif  // DLOCK_TX_PG_POOL_HPP_

// Group commit for the transaction log: the records and decisions of
// transactions in flight at once on one coordinator are written in one
// database transaction, one commit, one round trip, as a database's WAL
// commits concurrent transactions together. No window is waited for: a
// write goes out at once when no batch is in flight, and the writes that
// arrive while one is form the next. One transaction alone pays nothing.
#ifndef DLOCK_TX_GROUP_COMMIT_HPP_
#define DLOCK_TX_GROUP_COMMIT_HPP_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "dlock/error.hpp"
#include "postgres/pg_connection.hpp"

namespace dlock::tx::detail {

class GroupCommit {
 public:
  using Clock = std::chrono::steady_clock;
  struct Write {
    const std::string* sql;
    std::vector<std::string> params;
    Clock::time_point by = Clock::time_point::max();
    // Forced to disk before it is answered: a batch's commit is if any of
    // its writes is.
    bool durable = true;
  };
  // Writes a batch of two or more in one transaction: every write's rows,
  // or Errc::aborted when one was refused and none committed, or another
  // error for all of them (outcome_unknown: they may have committed).
  using Batch =
      std::function<Result<std::vector<postgres::Rows>>(const std::vector<const Write*>&, Clock::time_point by)>;
  // Writes one alone.
  using One = std::function<Result<postgres::Rows>(const Write&)>;

  // `in_flight`: batches written at once (each on a connection of its
  // own); `max_batch`: writes in one.
  GroupCommit(std::size_t in_flight, std::size_t max_batch, Batch batch, One one)
      : in_flight_(in_flight), max_batch_(max_batch), batch_(std::move(batch)), one_(std::move(one)) {}

  // Writes `w`, with whichever others are waiting when its batch goes out.
  // When a batch is refused, each of its writes is made again alone, so
  // that one refusal (its own error) does not fail the others. A write
  // still waiting for its batch at w.by is not sent: Errc::timeout (a batch
  // it is in is bounded by the earliest `by` of its writes).
  Result<postgres::Rows> write(const Write& w);

  // Batches written so far, the writes in them, and the writes waiting
  // for a batch now (for tests and tuning).
  std::size_t batches() const;
  std::size_t batched_writes() const;
  std::size_t waiting() const;

 private:
  struct Entry {
    const Write* write;
    std::condition_variable wake;  // its writer waits here: done, or oldest with a slot free
    bool taken = false;            // in a batch
    bool done = false;
    bool alone = false;  // its batch was refused: written again alone
    Result<postgres::Rows> result = Status(Errc::outcome_unknown, "not written");
  };
  void lead(std::unique_lock<std::mutex>& lock);
  // Wakes the oldest write waiting, which may lead the next batch.
  void wake_oldest() {
    if (!queue_.empty()) queue_.front()->wake.notify_one();
  }

  const std::size_t in_flight_, max_batch_;
  const Batch batch_;
  const One one_;
  mutable std::mutex mu_;
  std::deque<Entry*> queue_;  // under mu_
  std::size_t flying_ = 0;    // batches being written, under mu_
  std::size_t batches_ = 0, batched_writes_ = 0;
};

}  // namespace dlock::tx::detail

#endif  // DLOCK_TX_GROUP_COMMIT_HPP_

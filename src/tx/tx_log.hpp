// The coordinator's durable log, behind one interface so that more stores
// (PostgreSQL) can follow SQLite. Every state move is a compare-and-set on
// (gid, expected state) guarded by the claim's fence: a write with a fence
// lower than the last one that wrote the transaction changes nothing.
#ifndef DLOCK_TX_TX_LOG_HPP_
#define DLOCK_TX_TX_LOG_HPP_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/tx.hpp"

namespace dlock::tx::detail {

class TxLog {
 public:
  using Clock = std::chrono::steady_clock;

  virtual ~TxLog() = default;

  // This log's random id, made with its tables: it marks the prepared
  // transactions of its 2PC branches, so that recovery never touches those
  // of another log sharing a database.
  const std::string& id() const { return id_; }

  // Logs a new transaction, trying, with all its branches; due for recovery
  // `due_in` from now. invalid_argument if `gid` is already there.
  virtual Status create(std::string_view gid, std::uint64_t fence, const std::vector<Branch>& branches,
                        milliseconds due_in) = 0;
  // `from` -> `to`, with `reason`. false: the transaction is no longer in
  // `from`, or a higher fence wrote it (this claim is stale).
  // `by`: a store that can bound its wait (PostgreSQL) answers by then, or
  // outcome_unknown (the write may still execute).
  virtual Result<bool> move(std::string_view gid, std::uint64_t fence, State from, State to, std::string_view reason,
                            Clock::time_point by = Clock::time_point::max()) = 0;
  // Records each branch's progress (done, attempts, last error), due again
  // `due_in` from now. false as for move().
  virtual Result<bool> save(std::string_view gid, std::uint64_t fence, State state,
                            const std::vector<BranchInfo>& branches, milliseconds due_in) = 0;
  virtual Result<TxInfo> load(std::string_view gid, Clock::time_point by = Clock::time_point::max()) = 0;
  // Unfinished transactions due now, oldest due first.
  virtual Result<std::vector<std::string>> due(std::size_t limit) = 0;
  // The unfinished transactions, oldest first: unfinished_gids() then a
  // load() of each (one that finished meanwhile is left out).
  Result<std::vector<TxInfo>> unfinished(std::size_t limit);
  virtual Result<std::vector<std::string>> unfinished_gids(std::size_t limit) = 0;
  // Due now. not_held if there is no such unfinished transaction.
  virtual Status make_due(std::string_view gid) = 0;

 protected:
  std::string id_;
};

// A fresh log id (12 characters of [A-Za-z0-9_-] from the OS CSPRNG).
std::string new_log_id();

std::string_view state_column(State s);
bool parse_state(std::string_view text, State& out);

}  // namespace dlock::tx::detail

#endif  // DLOCK_TX_TX_LOG_HPP_

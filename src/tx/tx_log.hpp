// The coordinator's durable log, behind one interface so that more stores
// (PostgreSQL) can follow SQLite. Each transaction's record carries its
// claim: the coordinator driving it, until when (the log's clock), and a
// fence that every takeover raises. Every state move is a compare-and-set
// on (gid, expected state) guarded by that fence: a write with a fence
// lower than the last one that wrote the transaction changes nothing.
#ifndef DLOCK_TX_TX_LOG_HPP_
#define DLOCK_TX_TX_LOG_HPP_

#include <chrono>
#include <cstdint>
#include <optional>
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

  // Logs a new transaction, trying, with all its branches, claimed by the
  // caller for `lease` from now (the log's clock) and due for recovery when
  // that claim lapses. The claim rides in the record's own write: no lock
  // of its own is taken or released. Returns the claim's fence.
  // invalid_argument if `gid` is already there.
  virtual Result<std::uint64_t> create(std::string_view gid, const std::vector<Branch>& branches,
                                       milliseconds lease) = 0;
  // Takes over an unfinished transaction whose claim has lapsed (or was
  // released): its fence goes up by one and is returned, and every write
  // with a lower one changes nothing from then on. nullopt: finished, not
  // there, or claimed by a live coordinator.
  virtual Result<std::optional<std::uint64_t>> claim(std::string_view gid, milliseconds lease) = 0;
  // Extends the claim `fence` holds to `lease` from now, due for recovery
  // then. false: lapsed or taken over (never extended again). `by` as for
  // move().
  virtual Result<bool> renew(std::string_view gid, std::uint64_t fence, milliseconds lease,
                             Clock::time_point by = Clock::time_point::max()) = 0;
  // Ends the claim `fence` holds, and makes the transaction due: recovery
  // takes it at once. Nothing if the fence moved on.
  virtual Status release(std::string_view gid, std::uint64_t fence) = 0;
  // `from` -> `to`, with `reason`. false: the transaction is no longer in
  // `from`, or a higher fence wrote it (this claim is stale).
  // `by`: a store that can bound its wait (PostgreSQL) answers by then, or
  // outcome_unknown (the write may still execute).
  virtual Result<bool> move(std::string_view gid, std::uint64_t fence, State from, State to, std::string_view reason,
                            Clock::time_point by = Clock::time_point::max()) = 0;
  // Records each branch's progress (done, attempts, last error), due again
  // `due_in` from now, and ends the claim (recovery drives it from here).
  // false as for move().
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

// The participant-side barrier's rule, in one place for every store
// (sqlite_barrier, pg_barrier): idempotency, empty compensation and
// anti-suspension, decided by inserts of rows keyed (gid, branch, op) in
// the participant's own transaction, never by reading first.
#ifndef DLOCK_TX_BARRIER_RULE_HPP_
#define DLOCK_TX_BARRIER_RULE_HPP_

#include "dlock/tx.hpp"

namespace dlock::tx::detail {

// `tx` is the store's write transaction, begun: tx.insert(op) inserts the
// row (gid, branch, op) unless it is there (1: inserted, 0: there, -1: an
// error), tx.commit() commits (false: not known to have); a `tx` not
// committed rolls back when it goes, barrier rows included. `work()` runs
// the participant's work inside it; a throw is an unknown outcome. Any
// error of the barrier's own statements leaves nothing done and is an
// unknown outcome: the coordinator asks again.
template <class Tx, class Work>
Outcome barrier_rule(Tx& tx, Op op, Work&& work) {
  // A Cancel first takes the Try's place: if the Try's row was not there,
  // the Try never took effect (empty compensation) and now never will.
  int origin = 0;
  if (op == Op::cancel && (origin = tx.insert(Op::try_)) < 0) return Outcome::unknown;
  const int current = tx.insert(op);
  if (current < 0) return Outcome::unknown;
  if (origin == 1 || current == 0) return tx.commit() ? Outcome::success : Outcome::unknown;
  Outcome outcome = Outcome::unknown;
  try {
    outcome = work();
  } catch (...) {
    outcome = Outcome::unknown;
  }
  if (outcome != Outcome::success) return outcome;  // rolled back, barrier row included
  return tx.commit() ? Outcome::success : Outcome::unknown;
}

}  // namespace dlock::tx::detail

#endif  // DLOCK_TX_BARRIER_RULE_HPP_

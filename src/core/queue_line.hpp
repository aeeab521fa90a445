// A line of waiters in arrival order, each exclusive, a reader, or one of N
// permits, and who of them holds: core/lock_line.hpp's rules for stores
// where a listing of the line is the whole decision (a ZooKeeper lock's
// children by sequence, an etcd lock's keys by create revision). I/O-free.
//   exclusive: granted when nothing is ahead;
//   reader (shared, no limit): granted when no exclusive entry is ahead;
//   N permits: granted when no exclusive entry is ahead and fewer than N are.
// Grants follow line order: a reader behind a waiting writer waits too.
#ifndef DLOCK_CORE_QUEUE_LINE_HPP_
#define DLOCK_CORE_QUEUE_LINE_HPP_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend.hpp"

namespace dlock::detail {

// One entry of a line: its name in the store, its place and its kind.
struct QueueNode {
  std::string name;
  std::int64_t seq = 0;  // arrival order
  LockMode mode = LockMode::exclusive;
  unsigned permits = 0;  // shared only
};

// The word an entry's name carries for its kind: "lock" (exclusive), "read"
// (shared, no limit), "sem<N>" (N permits).
std::string kind_word(LockMode mode, unsigned permits);
// Sets n's mode and permits from such a word. An unknown word leaves it
// exclusive: the safe reading of an entry some other client made.
void read_kind_word(std::string_view word, QueueNode& n);

// How many entries at the head of the line (in arrival order) hold now.
std::size_t granted_count(const std::vector<QueueNode>& line);

// Watching more entries than this, a permit waiter watches the whole line.
inline constexpr unsigned kMaxPermitWatches = 16;

// Where `mine` stands in the line, and what to watch while it waits.
struct Standing {
  bool present = false;  // false: the entry is gone
  bool granted = false;
  // A shared entry ahead counts other permits: this caller disagrees with
  // the ones before it (their count).
  std::optional<unsigned> disagrees;
  // Entries ahead whose deletion may let it in: a writer its predecessor, a
  // reader the nearest writer ahead, a permit waiter with no writer ahead
  // the N entries just ahead (at least one of them goes before it can be
  // let in, whichever holders release first).
  std::vector<std::string> watch;
  bool watch_children = false;  // more permits than kMaxPermitWatches: any change
  std::size_t ahead = 0;
};
Standing standing_of(const std::vector<QueueNode>& line, std::string_view mine);

// invalid_argument: this call's permits differ from those of the line
// (Standing::disagrees).
Status disagreeing(const std::string& name, unsigned mine, unsigned theirs);
// precondition_failed: the owner holds the lock in the other mode, and an
// upgrade or downgrade would wait for its own hold.
Status upgrade_refused(const AcquireCall& call);

}  // namespace dlock::detail

#endif  // DLOCK_CORE_QUEUE_LINE_HPP_

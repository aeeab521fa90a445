// The lock queue's layout and order, I/O-free: a lock is a persistent node
// under the base, each acquire an ephemeral-sequential child of it named
// after the acquire's GUID (Curator's protected name, so a create whose
// reply was lost is found again), and the lowest sequence holds the lock.
#ifndef DLOCK_ZOOKEEPER_LOCK_QUEUE_HPP_
#define DLOCK_ZOOKEEPER_LOCK_QUEUE_HPP_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::zookeeper {

// A lock name as one path segment: letters, digits and "_-.:" stay, every
// other byte is %XX (so '/' cannot make a deeper path, and "." and ".."
// are escaped).
std::string encode_name(std::string_view name);
std::string decode_name(std::string_view segment);

// "_c_<guid>-lock-": the child's name before the server appends its
// ten-digit sequence.
std::string child_prefix(std::string_view guid);

// The server's sequence suffix of a queue child; nullopt when the name does
// not end in ten digits (not a queue node).
std::optional<std::int64_t> sequence_of(std::string_view child);

// Queue children in grant order (by sequence); other children are left out.
std::vector<std::string> in_order(std::vector<std::string> children);

// Where `mine` stands in a queue in grant order.
struct Place {
  bool present = false;     // false: the node is gone (deleted, or its session expired)
  bool first = false;       // it holds the lock
  std::string predecessor;  // the node just ahead (the only one to watch)
  std::size_t ahead = 0;
};
Place place_of(const std::vector<std::string>& ordered, std::string_view mine);

// The child created under `guid`, if any (after a create's reply was lost).
std::optional<std::string> find_by_guid(const std::vector<std::string>& children, std::string_view guid);

}  // namespace dlock::zookeeper

#endif  // DLOCK_ZOOKEEPER_LOCK_QUEUE_HPP_

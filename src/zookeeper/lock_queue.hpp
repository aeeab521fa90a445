// The lock queue's layout and order, I/O-free: a lock is a persistent node
// under the base, each acquire an ephemeral-sequential child of it named
// after the acquire's GUID (Curator's protected name, so a create whose
// reply was lost is found again) and its mode, and the line of children in
// sequence order decides who holds it (core/lock_line.hpp's rules, read off
// the names alone, so one listing is the whole decision):
//   _c_<guid>-lock-<seq>    exclusive: granted when nothing is ahead;
//   _c_<guid>-read-<seq>    shared, no limit (a read lock): granted when no
//                           exclusive node is ahead;
//   _c_<guid>-sem<N>-<seq>  shared, N permits: granted when no exclusive
//                           node is ahead and fewer than N nodes are.
// Grants follow line order: a reader behind a waiting writer waits too.
// The node's data is the owner, then a NUL and the holder's info.
//
// kazoo's names are read in every layout, and made in layout=kazoo:
//   <anything>__lock__<seq>   exclusive (kazoo's Lock and WriteLock);
//   <anything>__rlock__<seq>  shared, no limit (kazoo's ReadLock).
// kazoo sorts only the children whose names end so, by their sequence, and
// waits for them alone: Curator's names are invisible to it, and kazoo's
// to Curator (which sorts on the text after "lock-"). So one node name
// cannot serve both: a fleet picks its layout. The node's data in
// layout=kazoo is the holder's info alone (kazoo's contenders() shows it as
// the identifier).
#ifndef DLOCK_ZOOKEEPER_LOCK_QUEUE_HPP_
#define DLOCK_ZOOKEEPER_LOCK_QUEUE_HPP_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend.hpp"
#include "core/queue_line.hpp"
#include "holder_description.hpp"
#include "zookeeper/config.hpp"

namespace dlock::zookeeper {

// A lock name as one path segment: letters, digits and "_-.:" stay, every
// other byte is %XX (so '/' cannot make a deeper path, and "." and ".."
// are escaped).
std::string encode_name(std::string_view name);
std::string decode_name(std::string_view segment);

// "_c_<guid>-lock-": the child's name before the server appends its
// ten-digit sequence. The shared forms: "-read-" (permits 0), "-sem<N>-".
// kazoo's naming: "_c_<guid>__lock__", "_c_<guid>__rlock__" (it has no
// counted form: the caller refuses permits, kazoo_refusal).
std::string child_prefix(std::string_view guid);
std::string child_prefix(std::string_view guid, detail::LockMode mode, unsigned permits,
                         Naming naming = Naming::curator);

// invalid_argument for a lock kazoo's recipes cannot share (a counted one:
// kazoo's Semaphore keeps lease nodes, not a queue); ok otherwise.
Status kazoo_refusal(detail::LockMode mode, unsigned permits);

// A node's data: the owner and the holder's info (holder_description.hpp);
// in kazoo's naming the info alone.
using detail::NodeData;
using detail::parse_node_data;
std::string node_data(Naming naming, std::string_view owner, std::string_view info);

// What inspect shows of the holding node: dlock's (and Curator's) nodes
// start with "_c_", and their info is the holder; a peer's node (kazoo's
// own) is shown as one, with its identifier.
std::string holder_of(std::string_view child, std::string_view data);

// The line's rules (core/queue_line.hpp), shared with etcd's line.
using detail::granted_count;
using detail::kMaxPermitWatches;
using detail::QueueNode;
using detail::Standing;
using detail::standing_of;

// nullopt: not a queue node. An unknown kind counts as exclusive (the safe
// reading of a node some later version made).
std::optional<QueueNode> parse_child(std::string_view child);
// Queue children in line order (by sequence); other children are left out.
std::vector<QueueNode> line_of(const std::vector<std::string>& children);

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
// Every child made with `guid`: one acquire may have made two, when a
// create's answer was lost and a listing on another server missed it.
std::vector<std::string> nodes_of_guid(const std::vector<std::string>& children, std::string_view guid);

}  // namespace dlock::zookeeper

#endif  // DLOCK_ZOOKEEPER_LOCK_QUEUE_HPP_

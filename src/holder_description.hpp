// The description a grant stores of its holder by default, so that an
// operator can ask who holds a lock (ClientOptions::describe_holder).
#ifndef DLOCK_HOLDER_DESCRIPTION_HPP_
#define DLOCK_HOLDER_DESCRIPTION_HPP_

#include <string>
#include <string_view>

namespace dlock::detail {

// "PROGRAM[PID]@HOST": `label`, or the program's short name (as ps shows
// it), then this process's id (read per call: a forked child describes
// itself) and the host's name. At most kMaxHolderInfo bytes: a long label is
// cut, the pid and host are kept.
std::string describe_holder(std::string_view label);

// What a queue entry (a ZooKeeper node's data, an etcd key's value) stores
// of its maker: the owner, then a NUL and the holder's info when there is
// one (data without a NUL is an owner alone, as older clients wrote it).
std::string node_data(std::string_view owner, std::string_view info);
struct NodeData {
  std::string owner, info;
};
NodeData parse_node_data(std::string_view data);

}  // namespace dlock::detail

#endif  // DLOCK_HOLDER_DESCRIPTION_HPP_

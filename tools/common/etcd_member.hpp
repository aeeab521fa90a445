// tools/common/etcd_member.hpp: a private one-member etcd (Debian's
// etcd-server 3.4) on free loopback ports, for the experiments. The tests'
// 3-member clusters are tests/support/etcd_cluster.
#ifndef DLOCK_TOOLS_COMMON_ETCD_MEMBER_HPP_
#define DLOCK_TOOLS_COMMON_ETCD_MEMBER_HPP_

#include <filesystem>
#include <string>
#include <vector>

#include "common/child_process.hpp"

namespace dlock::tools {

// Starts etcd with its data in `dir` (appended to `children`, for the
// caller to stop) and waits until it serves: "etcd://127.0.0.1:PORT".
// Empty if etcd is not installed. Throws if it does not start.
std::string start_etcd(const std::filesystem::path& dir, std::vector<Child>& children);

}  // namespace dlock::tools

#endif  // DLOCK_TOOLS_COMMON_ETCD_MEMBER_HPP_

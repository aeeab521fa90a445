// Blocking calls to an etcd cluster over its v3 gRPC API, each bounded by
// the caller's deadline (steady clock): the I/O layer the etcd backend
// stands on. No gRPC or protobuf header here: the generated code stays in
// etcd_rpc.cpp.
//
// Outcomes: a read that gets no answer is unavailable (retry); a write that
// gets none (deadline, a member gone mid-call) is outcome_unknown, since
// it may have been applied. With user and password set, the client
// authenticates once and sends the token with every call, authenticating
// again when the server says the token expired.
#ifndef DLOCK_ETCD_ETCD_RPC_HPP_
#define DLOCK_ETCD_ETCD_RPC_HPP_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/error.hpp"

namespace dlock::etcd {

using Clock = std::chrono::steady_clock;

struct KeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;  // the cluster-wide revision that created it
  std::int64_t mod_revision = 0;
  std::int64_t version = 0;
  std::int64_t lease = 0;  // 0: none
};

struct EtcdConfig {
  std::vector<std::string> endpoints;  // "host:port", tried in turn
  std::string user;                    // empty: no authentication
  std::string password;
};

// The end of the range holding every key that starts with `prefix`
// (etcd's clientv3.GetPrefixRangeEnd).
std::string prefix_end(std::string_view prefix);

class EtcdRpc {
 public:
  // Connects to the first endpoint that answers a status call by `by`.
  static Result<std::unique_ptr<EtcdRpc>> connect(EtcdConfig config, Clock::time_point by);
  ~EtcdRpc();
  EtcdRpc(const EtcdRpc&) = delete;
  EtcdRpc& operator=(const EtcdRpc&) = delete;

  struct Range {
    std::int64_t revision = 0;  // the store's revision when read
    std::vector<KeyValue> kvs;
  };
  // The keys in [key, range_end) (range_end empty: `key` alone), by key.
  Result<Range> range(std::string_view key, std::string_view range_end, Clock::time_point by);
  // The key created last before `max_create_revision` among those starting
  // with `prefix` (etcd's Mutex: the waiter just before one); none: empty.
  Result<Range> last_created_before(std::string_view prefix, std::int64_t max_create_revision, Clock::time_point by);
  // The revision of the write.
  Result<std::int64_t> put(std::string_view key, std::string_view value, std::int64_t lease, Clock::time_point by);
  // How many keys were deleted.
  Result<std::int64_t> erase(std::string_view key, Clock::time_point by);

  // Puts key = value under `lease` unless the key exists (a transaction
  // comparing its create revision with 0), and reads the key either way.
  struct Created {
    bool created = false;
    KeyValue kv;                // the key as it is now (this write's, or the one there)
    std::int64_t revision = 0;  // the store's revision after the transaction
  };
  Result<Created> create(std::string_view key, std::string_view value, std::int64_t lease, Clock::time_point by);

  // A lease of `ttl_seconds`: its id.
  Result<std::int64_t> lease_grant(std::int64_t ttl_seconds, Clock::time_point by);
  Status lease_revoke(std::int64_t id, Clock::time_point by);
  // Seconds left on the lease; -1: it is gone.
  Result<std::int64_t> lease_time_to_live(std::int64_t id, Clock::time_point by);

  struct MemberStatus {
    std::uint64_t member_id = 0;
    std::uint64_t leader = 0;
    std::uint64_t raft_term = 0;
    std::string version;
  };
  Result<MemberStatus> status(Clock::time_point by);

 private:
  struct Impl;
  explicit EtcdRpc(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlock::etcd

#endif  // DLOCK_ETCD_ETCD_RPC_HPP_

// Redis Cluster's routing data, without I/O: which slot a key hashes to,
// which master serves a slot (from CLUSTER SLOTS), and what a redirect
// (MOVED, ASK) or a cluster-state error asks the client to do.
#ifndef DLOCK_REDIS_CLUSTER_MAP_HPP_
#define DLOCK_REDIS_CLUSTER_MAP_HPP_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/error.hpp"
#include "redis/resp.hpp"

namespace dlock::redis {

constexpr int kClusterSlots = 16384;

// CRC16-XMODEM, the cluster's key hash.
std::uint16_t crc16_xmodem(std::string_view data);
// The slot of `key`, with the hash-tag rule: if the key has a '{' and a '}'
// after it with something between, only that part is hashed.
int key_slot(std::string_view key);

// A master as the cluster announces it: "host:port".
struct ClusterNode {
  std::string host;
  std::uint16_t port = 0;
  std::string address() const;
};

// Slot -> master. Built whole from a CLUSTER SLOTS reply; single slots are
// moved by MOVED redirects between refreshes.
class SlotMap {
 public:
  SlotMap() { owner_.fill(kNone); }
  // `seed_host` stands in for a node announced without a host ("" or "?":
  // the node the reply came from does not know its own address).
  static Result<SlotMap> from_cluster_slots(const Reply& reply, std::string_view seed_host);

  bool empty() const { return masters_.empty(); }
  // The master of `slot`; nullptr if no node serves it (CLUSTERDOWN).
  const ClusterNode* master_of(int slot) const;
  // The masters that serve at least one slot (a MOVED may have taken a
  // node's last one).
  std::vector<ClusterNode> masters() const;
  // A MOVED redirect: `slot` is served by `node` now.
  void move(int slot, const ClusterNode& node);
  // Every master renamed by `f` (each a distinct node still).
  template <class F>
  void rename(F&& f) {
    for (ClusterNode& n : masters_) n = f(n);
  }
  // How many slots no master serves.
  int unserved() const;

 private:
  static constexpr std::uint16_t kNone = 0xFFFF;
  int index_of(const ClusterNode& node);
  std::vector<ClusterNode> masters_;
  std::array<std::uint16_t, kClusterSlots> owner_{};  // index into masters_, kNone
};

// What an error reply asks the client to do.
struct Redirect {
  enum class Kind { none, moved, ask, tryagain, clusterdown };
  Kind kind = Kind::none;
  int slot = -1;
  ClusterNode node;  // moved, ask
};
// "MOVED 3999 127.0.0.1:6381", "ASK 3999 127.0.0.1:6381", "TRYAGAIN ...",
// "CLUSTERDOWN ..."; anything else is none. An IPv6 address is
// "MOVED 1 ::1:6381" (the port is after the last ':'); an empty host
// ("MOVED 1 :6381") means the node that answered, left to the caller.
Redirect parse_redirect(std::string_view error);

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_CLUSTER_MAP_HPP_

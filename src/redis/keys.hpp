// The Redis keys derived from a lock name.
#ifndef DLOCK_REDIS_KEYS_HPP_
#define DLOCK_REDIS_KEYS_HPP_

#include <string>
#include <string_view>

namespace dlock::detail {

// The keys of one lock. The lock hash and its channel share the hash tag
// {name}, so one Redis Cluster slot holds them. Braces inside a name would
// break the tag, so they are percent-escaped, as is '%' itself; other bytes
// pass through.
//
// Fences come from one counter per prefix, not one per name: a per-name
// counter must never expire (fences would go backwards), so every distinct
// name ever locked would leave a key behind forever. One shared counter is
// strictly increasing for every name. (In Redis Cluster the counter will be
// one per hash slot, named to fall in the lock's slot.)
struct LockKeys {
  std::string lock;     // hash: o = owner, n = re-entry count, f = fence
  std::string fence;    // counter: last fence issued under the prefix
  std::string channel;  // pub/sub channel: release notifications
  std::string line;     // a line's shared holders and waiters (line_scripts.hpp)
};
LockKeys lock_keys(std::string_view prefix, std::string_view name);

// A SCAN MATCH pattern for the keys of every lock whose name starts with
// `name_prefix` (their lock hashes, lines and tombstones).
std::string lock_key_pattern(std::string_view prefix, std::string_view name_prefix);
// The lock name a key of lock_keys(prefix, name) belongs to; empty if `key`
// is not one.
std::string name_of_key(std::string_view prefix, std::string_view key);

}  // namespace dlock::detail

#endif  // DLOCK_REDIS_KEYS_HPP_

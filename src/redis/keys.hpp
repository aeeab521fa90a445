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
// Where fences come from:
//  - prefix (one server, redis:// and rediss://): one counter per prefix,
//    "<prefix>fence". A per-name counter that only counts must never expire
//    (fences would go backwards), so every distinct name ever locked would
//    leave a key behind forever. One shared counter is strictly increasing
//    for every name, across names too.
//  - name (Redis Cluster, Sentinel): "<prefix>{name}:f", in the lock's slot, so a
//    script touches one slot and a slot migration moves the counter with
//    the lock. The scripts (lua/fence.lua) raise it to at
//    least the server's clock in microseconds, so it may expire after a
//    day idle, and a failover that lost the last increments still issues a
//    larger fence, as long as the servers' clocks are within the failover's
//    time of each other. Fences then increase per name only.
enum class FenceScope { prefix, name };

// Where a lock lives (the URL's layout=):
//  - dlock: the hash "<prefix>{name}" (owner, re-entry count, fence, holder),
//    beside it the line and the wake channel. Every guarantee.
//  - plain: the string key "name" itself, its value the holder's token:
//    the layout of redis-py's Lock, npm redlock, redsync and
//    redis-plus-plus (SET NX PX, compare-and-delete), so dlock and those
//    libraries exclude each other on one name. dlock's value is
//    "<fence>:<granted at>:<owner length>:<owner><holder>" (lua/plain_lib.lua;
//    a peer reads nothing in it: each library compares its own token). dlock's side keys (fence
//    counter, wake channel, tombstones) are "<prefix>{<slot tag>}:plain:
//    {name}...", where the slot tag puts them in the name's cluster slot.
//  - redisson: Redisson's RLock, the hash "name" itself, a field
//    "<client id>:<thread id>" per holder with its re-entry count, its
//    release published as '0' on "redisson_lock__channel:{name}" (no
//    braces added when the name has some, as Redisson's prefixName), so
//    dlock and Redisson's RLock exclude and wake each other on one name.
//    dlock's hold is a field of that shape and a field 'dlock' with the
//    plain layout's value (lua/redisson_lib.lua); its side keys are the
//    plain layout's, under ":redisson:".
enum class Layout { dlock, plain, redisson };
struct LockKeys {
  std::string lock;       // hash: o = owner, n = re-entry count, f = fence
  std::string fence;      // counter: last fence issued (FenceScope)
  std::string channel;    // pub/sub channel: release notifications
  std::string line;       // a line's shared holders and waiters (line_scripts.hpp); plain: none
  std::string tombstone;  // the stem of a grant's tombstone: + wire owner
  // redisson: node-redisson's channel for the name when it is not Java
  // Redisson's (a name with '{' not at its start); released on both,
  // watched on both. Else empty.
  std::string peer_channel;
};
LockKeys lock_keys(std::string_view prefix, std::string_view name, FenceScope fences = FenceScope::prefix);
// The plain layout's keys of `name` (no line: that layout has none).
LockKeys plain_keys(std::string_view prefix, std::string_view name, FenceScope fences = FenceScope::prefix);
// The redisson layout's (no line either).
LockKeys redisson_keys(std::string_view prefix, std::string_view name, FenceScope fences = FenceScope::prefix);
// The prefix of a single-key layout's side keys: `prefix` with its braces
// escaped, so that the side keys' own slot tag, not a hash tag in the
// prefix ("{dlock}:", a common cluster practice), puts them in the name's
// slot (else a script's keys span two slots: CROSSSLOT).
std::string side_prefix(std::string_view prefix);
// A short hash tag whose key slot is `slot` (0..16383): a key "{tag}..."
// lands in that slot.
const std::string& slot_tag(int slot);

// The keys of a backend: its prefix, fence scope and layout.
struct Keyspace {
  std::string prefix;
  FenceScope fences = FenceScope::prefix;
  Layout layout = Layout::dlock;

  bool plain() const { return layout == Layout::plain; }
  bool redisson() const { return layout == Layout::redisson; }
  // One key per lock, a peer library's, and no line (plain, redisson).
  bool single_key() const { return layout != Layout::dlock; }
  LockKeys keys(std::string_view name) const {
    if (plain()) return plain_keys(prefix, name, fences);
    if (redisson()) return redisson_keys(prefix, name, fences);
    return lock_keys(prefix, name, fences);
  }
};

// A SCAN MATCH pattern for the keys of every lock whose name starts with
// `name_prefix` (their lock hashes, lines and tombstones).
std::string lock_key_pattern(std::string_view prefix, std::string_view name_prefix);
// The plain layout's: every key starting with `name_prefix`.
std::string plain_key_pattern(std::string_view name_prefix);
// The lock name a key of lock_keys(prefix, name) belongs to; empty if `key`
// is not one, or is a per-name fence counter (it outlives the lock by a day).
std::string name_of_key(std::string_view prefix, std::string_view key);
// True if `key` is one dlock keeps for itself under `prefix`, in any
// layout: the fence counter, a lock hash "<prefix>{name}", or a side key
// "<prefix>{tag}:<suffix>" (fence, wake, line, tombstone, a single-key
// layout's). A single-key layout locks the key named like the lock, so it
// refuses such a name: its hold would overwrite the key, or wait on it.
bool own_key(std::string_view prefix, std::string_view key);

}  // namespace dlock::detail

#endif  // DLOCK_REDIS_KEYS_HPP_

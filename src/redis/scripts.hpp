// The Lua scripts that make each lock operation one atomic step on the server.
#ifndef DLOCK_REDIS_SCRIPTS_HPP_
#define DLOCK_REDIS_SCRIPTS_HPP_

#include <string>
#include <string_view>

namespace dlock::redis {

struct Script {
  std::string_view body;
  std::string sha1;  // hex, for EVALSHA
};

// KEYS: lock, fence counter. ARGV: owner, lease ms, depth the caller holds,
// attempt number (0: none; see AcquireCall::round).
// Returns {1, fence, depth} granted, {0, holder pttl, 0} busy,
// {2, 0, 0} lost, {3, server depth, 0} mismatch.
const Script& acquire_script();
// KEYS: lock. ARGV: owner, depth the caller holds, channel, '1' to free
// every level at once, attempt number to undo (0: any).
// Returns {0, 0} freed (and published), {1, depth} decremented,
// {-1, 0} not held, {-2, 0} another owner, {-3, depth} mismatch, {-4, depth}
// the hold is a later attempt's (nothing touched).
const Script& release_script();
// KEYS: lock keys. ARGV: owner1, lease1, owner2, lease2...
// Returns one code per key: 1 renewed, 0 gone, 2 taken, 3 wrong type.
const Script& renew_script();

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_SCRIPTS_HPP_

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

// SHA1 of a script body, hex.
std::string script_sha1(std::string_view body);

// `s` with every PUBLISH a SPUBLISH (sharded pub/sub, Redis 7): for a
// cluster whose waiters SSUBSCRIBE at their slot's master. The channel
// shares the lock's hash tag, so it is in the script's slot. Any thread.
const Script& with_sharded_publish(const Script& s);

// KEYS: lock, fence counter, tombstone, line (line_scripts.hpp). ARGV:
// owner, lease ms (digits), depth the caller holds, attempt number (0: none;
// see RedlockMaster::acquire_round), wake channel, the holder's description,
// the caller's wall clock in ms (inspect's "held for"), and for a caller
// that will wait its waiter member and '1' if it was busy before
// (lua/wake_lib.lua). A free lock beside a live line is busy (after the
// line is settled: an expired holder hands over), and so is a free lock
// reserved for another waiter a release woke.
// Returns {6, 0, 0} when the caller's owner holds it shared (as the line
// acquire), {1, fence, depth} granted, {0, holder pttl, 0} busy,
// {2, 0, 0} lost, {3, server depth, 0} mismatch.
const Script& acquire_script();
// KEYS: lock, tombstone, line, fence counter. ARGV: owner, depth the caller
// holds, channel, '1' to free every level at once, attempt number to undo
// (0: any), tombstone ms. Freeing the lock hands it to the head of a line
// if one waits (line_scripts.hpp), else publishes '1'.
// Returns {0, 0} freed (and published), {1, depth} decremented,
// {-1, 0} not held, {-2, 0} another owner, {-3, depth} mismatch, {-4, depth}
// the hold is a later attempt's (nothing touched).
const Script& release_script();
// KEYS: per call the lock key (and the line key after it for a line's
// call). ARGV: owner, lease, 'p' | 'l' per call.
// Returns one code per key: 1 renewed, 0 gone, 2 taken, 3 wrong type.
const Script& renew_script();
// A plain waiter leaves (lua/leave.lua): KEYS lock; ARGV member, channel.
const Script& leave_script();

// The plain layout (keys.hpp), one string key per lock: lua/plain_*.lua
// say what each takes and returns. Busy is {7, holder pttl, 0}: a peer's
// release publishes nothing, so the waiter polls (WaitHint::poll).
const Script& plain_acquire_script();
const Script& plain_release_script();
const Script& plain_inspect_script();

// The redisson layout (keys.hpp), Redisson's RLock hash: lua/redisson_*.lua,
// the plain scripts' keys and arguments. Busy is {0, holder pttl, 0}: a
// release of either library publishes Redisson's unlock message.
const Script& redisson_acquire_script();
const Script& redisson_release_script();
const Script& redisson_inspect_script();

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_SCRIPTS_HPP_

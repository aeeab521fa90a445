// The Lua scripts of fair, shared and counted locks ("lines") on one Redis
// master (src/redis/lua/line_*.lua): core/lock_line.hpp's table of
// decisions, decision for decision. Every script that may grant settles
// the line first (lua/line_settle.lua: purge, promote with hand-overs
// published, save) and draws fences from lua/fence.lua.
//
// Storage, every key in the name's hash tag {N} (one cluster slot):
//   <prefix>{N}       the exclusive holder, as a plain lock keeps it (o, n, f;
//                     'i' = what the holder said of itself), so that plain
//                     acquirers and line holders exclude each other;
//   <prefix>{N}:q     the shared holders and the line (permits, next ticket,
//                     waiters oldest first), MessagePack, expiring at its
//                     latest entry's expiry (server time);
//   <prefix>{N}:t:<o> a tombstone per owner + grant, as for plain locks.
// Owners are the wire owners "<owner>/<grant>". A hand-over is published on
// the name's wake channel as "h:<fence>:<lease ms>:<wire owner>" (the plain
// release stays "1").
#ifndef DLOCK_REDIS_LINE_SCRIPTS_HPP_
#define DLOCK_REDIS_LINE_SCRIPTS_HPP_

#include <string_view>

#include "redis/scripts.hpp"

namespace dlock::redis {

// KEYS: lock, fence counter, tombstone, line. ARGV: owner, lease ms, held,
// mode ('x' | 's'), permits, queued ('1' | '0'), info, channel, and the
// caller's client id if it will wait (its hand-over goes to that client's
// channel, "<channel>:<id>"; '' or none: to the name's channel).
// Returns {1, fence, depth} granted, {0, wait ms (-1: event), 0} busy,
// {2, 0, 0} lost, {3, depth, 0} mismatch, {5, the name's permits, 0}
// permits disagree, {6, 0 | 1, 0} a change of mode (0: holds it shared and
// asked exclusive; 1: the reverse).
const Script& line_acquire_script();
// KEYS: lock, tombstone, line, fence counter. ARGV: owner, held, channel,
// all ('1' | '0'), tombstone ms. Returns as release_script().
const Script& line_release_script();
// KEYS: lock, tombstone, line, fence counter. ARGV: owner, held, channel,
// tombstone ms. Returns 1.
const Script& line_abandon_script();
// KEYS: lock, line, fence counter. ARGV: channel. Settles the name and
// returns {is a line (0 | 1), held, fence, depth, remaining ms, holder info,
// holders, shared (0 | 1), waiters} of the oldest grant.
const Script& line_inspect_script();

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_LINE_SCRIPTS_HPP_

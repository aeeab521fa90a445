-- The plain layout (keys.hpp): the lock is the string key KEYS[1] itself,
-- as redis-py's Lock, npm redlock and redsync keep it, so a grant is a
-- SET NX PX that any of them would also make. KEYS: lock, fence counter,
-- tombstone. ARGV: owner (wire owner), lease ms, holder description, the
-- caller's wall clock in ms (inspect's "held for").
-- dlock's value is plain_lib.lua's: a replay of
-- this very grant (its reply lost) finds its owner there and is answered
-- with the same fence. The server keeps no re-entry count (ClientCore
-- does), so every call here is a fresh grant.
-- Returns {1, fence, 1} granted, {7, holder pttl, 0} busy (-1: a peer's key
-- without expiry; its releases publish nothing: the waiter polls), {2, 0,
-- 0} given up (a tombstone: this grant was already released or undone).
--@include fence.lua
--@include plain_lib.lua
local lease = tonumber(ARGV[2])
if not string.find(ARGV[2], '^[1-9]%d*$') or lease > 1000000000000 then
  return redis.error_reply('ERR dlock: lease out of range: ' .. ARGV[2])
end
local v = redis.call('get', KEYS[1])
if not v then
  if redis.call('exists', KEYS[3]) == 1 then return {2, 0, 0} end
  local fence, refused = L_grant_fence(KEYS[2])
  if not fence then return refused end
  local f = string.format('%d', fence)
  redis.call('set', KEYS[1], P_value(f), 'px', ARGV[2])
  return {1, fence, 1}
end
local f, owner = P_parse(v)
if owner == ARGV[1] then
  if redis.call('pttl', KEYS[1]) < lease then redis.call('pexpire', KEYS[1], ARGV[2]) end
  return {1, f, 1}
end
return {7, redis.call('pttl', KEYS[1]), 0}

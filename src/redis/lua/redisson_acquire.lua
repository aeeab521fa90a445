-- The redisson layout's grant (keys.hpp, redisson_lib.lua): the lock is
-- free when the hash at KEYS[1] does not exist, as Redisson's own acquire
-- decides. KEYS: lock, fence counter, tombstone. ARGV: owner (wire owner),
-- lease ms, holder description, the caller's wall clock in ms. Every call
-- is a fresh grant (the client counts re-entry); a replay of this very
-- grant (its reply lost) finds its field and is answered with the same
-- fence. Returns {1, fence, 1} granted, {0, holder pttl, 0} busy (a
-- release of either library publishes on the lock's channel: the waiter
-- wakes then, or at the holder's expiry), {2, 0, 0} given up (a tombstone:
-- this grant was already released or undone).
--@include fence.lua
--@include plain_lib.lua
--@include redisson_lib.lua
local lease = tonumber(ARGV[2])
if not string.find(ARGV[2], '^[1-9]%d*$') or lease > 1000000000000 then
  return redis.error_reply('ERR dlock: lease out of range: ' .. ARGV[2])
end
local field = R_field(ARGV[1])
if redis.call('exists', KEYS[1]) == 0 then
  if redis.call('exists', KEYS[3]) == 1 then return {2, 0, 0} end
  local fence, refused = L_grant_fence(KEYS[2])
  if not fence then return refused end
  local f = string.format('%d', fence)
  redis.call('hset', KEYS[1], field, '1', 'dlock', P_value(f))
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, fence, 1}
end
-- Another type at the name fails here (WRONGTYPE), before any write.
if redis.call('hexists', KEYS[1], field) == 1 then
  local f = P_parse(redis.call('hget', KEYS[1], 'dlock') or '')
  if redis.call('pttl', KEYS[1]) < lease then redis.call('pexpire', KEYS[1], ARGV[2]) end
  return {1, f or 0, 1}
end
return {0, redis.call('pttl', KEYS[1]), 0}

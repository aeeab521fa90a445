-- The owner the scripts see is the caller's owner plus the id of one grant
-- ("<owner>/<grant hex>"), so a call can only touch the grant it belongs to:
-- a release delayed in the network cannot delete the same owner's next grant.
--
-- A grant never re-creates a hold the caller believes it has (held > 0): that
-- would hide a break in mutual exclusion. A replayed call (reply lost, sent
-- again) finds depth == held + 1 and is answered without applying it twice;
-- its lease then counts from the replay, as the caller's validity does. The
-- hold records the attempt number that last granted it ('r'): an older
-- attempt's replay does not take it back, and an undo names its attempt.
-- KEYS[3] is the grant's tombstone: a release or undo of a grant whose
-- request may still be in the network leaves it, so that stray copy cannot
-- re-create the lock after it was released ({2, 0, 0}: given up).
-- The lease is checked before anything is written: a key without a TTL
-- would be held by nobody, forever.
-- The fence counter is its own key so it survives the lock key's expiry
-- (keys.hpp: one per prefix, or one per name in a cluster).
--@include fence.lua
-- Digits only: PEXPIRE is sent ARGV[2] itself, after the hold is written.
local lease = tonumber(ARGV[2])
if not string.find(ARGV[2], '^[1-9]%d*$') or lease > 1000000000000 then
  return redis.error_reply('ERR dlock: lease out of range: ' .. ARGV[2])
end
local held = tonumber(ARGV[3])
local round = tonumber(ARGV[4]) or 0
-- A fresh grant: the fence, then the hold in two commands. Numbers go to
-- the server as the strings they arrived as (ARGV): each number Lua hands
-- to redis.call is formatted anew, and that showed in the server's profile.
-- 't' (when it was granted, for inspect) is the caller's wall clock in ms:
-- a TIME per grant cost the server more than the rest of the hold's fields.
local function grant()
  local fence, refused = L_grant_fence(KEYS[2])
  if not fence then return refused end
  -- Who holds it: 'd', not the line's 'i', which marks a line's holder.
  local described = ARGV[6] and ARGV[6] ~= ''
  local fields = {'o', ARGV[1], 'n', '1', 'f', fence}
  if round > 0 then
    fields[#fields + 1] = 'r'
    fields[#fields + 1] = ARGV[4]
  end
  if described then
    fields[#fields + 1] = 'd'
    fields[#fields + 1] = ARGV[6]
    fields[#fields + 1] = 't'
    fields[#fields + 1] = ARGV[7] or ''
  end
  redis.call('hset', KEYS[1], unpack(fields))
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, fence, 1}
end
-- The common case first: no lock key, tombstone or line, one command.
if held == 0 and redis.call('exists', KEYS[1], KEYS[3], KEYS[4]) == 0 then return grant() end
local owner = redis.call('hget', KEYS[1], 'o')
if not owner then
  -- A line beside it (shared holders, waiters) is settled first (an expired
  -- holder hands over), and a caller outside the line waits behind it.
  if redis.call('exists', KEYS[1]) == 1 then
    return redis.error_reply('WRONGTYPE lock key is a hash without an owner field')
  end
  if held > 0 then return {2, 0, 0} end
  if redis.call('exists', KEYS[3]) == 1 then return {2, 0, 0} end
  -- Not the lock key, not the tombstone (held == 0): the line.
--@include line_settle.lua
  local _, busy, conflict = line_settle(KEYS[1], KEYS[2], KEYS[4], ARGV[5], ARGV[1])
  if conflict then return {6, 0, 0} end
  if busy then return {0, busy, 0} end
  return grant()
end
if owner == ARGV[1] then
  local n = tonumber(redis.call('hget', KEYS[1], 'n'))
  if n ~= held and n ~= held + 1 then return {3, n, 0} end
  if n == held then n = redis.call('hincrby', KEYS[1], 'n', 1) end
  if n == held + 1 and round >= (tonumber(redis.call('hget', KEYS[1], 'r')) or 0) then
    redis.call('hset', KEYS[1], 'r', round)
    if redis.call('pttl', KEYS[1]) < lease then redis.call('pexpire', KEYS[1], lease) end
  end
  return {1, tonumber(redis.call('hget', KEYS[1], 'f')), n}
end
-- Another grant holds it: a caller that believes it holds (held > 0) lost
-- its hold and is told so at once, not left waiting for a level it can
-- never be given.
if held > 0 then return {2, 0, 0} end
return {0, redis.call('pttl', KEYS[1]), 0}

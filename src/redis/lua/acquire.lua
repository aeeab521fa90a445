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
--@include wake_lib.lua
-- Digits only: PEXPIRE is sent ARGV[2] itself, after the hold is written.
local lease = tonumber(ARGV[2])
if not string.find(ARGV[2], '^[1-9]%d*$') or lease > 1000000000000 then
  return redis.error_reply('ERR dlock: lease out of range: ' .. ARGV[2])
end
local held = tonumber(ARGV[3])
local round = tonumber(ARGV[4]) or 0
-- A caller that will wait if busy (wake_lib.lua): its member, and '1' when
-- an earlier attempt of its call was busy (it may be queued).
local member = ARGV[8] or ''
local waited = ARGV[9] == '1'
-- A fresh grant: the fence, then the hold in two commands. Numbers go to
-- the server as the strings they arrived as (ARGV): each number Lua hands
-- to redis.call is formatted anew, and that showed in the server's profile.
-- 't' (when it was granted, for inspect) is the caller's wall clock in ms:
-- a TIME per grant cost the server more than the rest of the hold's fields.
-- `queued`: waiters may be queued (the release then wakes the next).
local function grant(queued)
  local fence, refused = L_grant_fence(KEYS[2])
  if not fence then return refused end
  if waited then redis.call('zrem', KEYS[1] .. ':w', member) end
  if queued == nil then queued = redis.call('exists', KEYS[1] .. ':w') == 1 end
  -- Who holds it: 'd', not the line's 'i', which marks a line's holder.
  local described = ARGV[6] and ARGV[6] ~= ''
  local fields = {'o', ARGV[1], 'n', '1', 'f', fence}
  if round > 0 then
    fields[#fields + 1] = 'r'
    fields[#fields + 1] = ARGV[4]
  end
  if queued then
    fields[#fields + 1] = 'w'
    fields[#fields + 1] = '1'
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
-- Busy: a caller that will wait joins the waiters, and the holder's hash
-- is marked so that its release wakes the first of them.
local function busy(ttl, marked)
  if member ~= '' then
    L_join(KEYS[1], member, ttl, waited)
    if marked then redis.call('hset', KEYS[1], 'w', '1') end
  end
  return {0, ttl, 0}
end
-- The common case first: no lock key, tombstone, line, waiter or woken
-- waiter, one command.
if held == 0 and redis.call('exists', KEYS[1], KEYS[3], KEYS[4], KEYS[1] .. ':w', KEYS[1] .. ':r') == 0 then
  return grant(false)
end
local owner = redis.call('hget', KEYS[1], 'o')
if not owner then
  -- A line beside it (shared holders, waiters) is settled first (an expired
  -- holder hands over), and a caller outside the line waits behind it.
  if redis.call('exists', KEYS[1]) == 1 then
    return redis.error_reply('WRONGTYPE lock key is a hash without an owner field')
  end
  if held > 0 then return {2, 0, 0} end
  if redis.call('exists', KEYS[3]) == 1 then return {2, 0, 0} end
  -- Reserved for the waiter a release woke: only it takes it.
  local woken = redis.call('get', KEYS[1] .. ':r')
  if woken then
    if woken ~= member then return busy(redis.call('pttl', KEYS[1] .. ':r'), false) end
    redis.call('del', KEYS[1] .. ':r')
  end
  -- Not the lock key, not the tombstone (held == 0): the line.
--@include line_settle.lua
  local _, line_busy, conflict = line_settle(KEYS[1], KEYS[2], KEYS[4], ARGV[5], ARGV[1])
  if conflict then return {6, 0, 0} end
  if line_busy then return busy(line_busy, false) end
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
return busy(redis.call('pttl', KEYS[1]), true)

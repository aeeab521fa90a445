-- KEYS and ARGV: scripts.hpp, release_script().
--@include fence.lua
--@include line_settle.lua
--@include wake_lib.lua
local tomb = tonumber(ARGV[6]) or 0
if tomb > 0 then redis.call('set', KEYS[2], '1', 'px', tomb) end
local h = redis.call('hmget', KEYS[1], 'o', 'n', 'r', 'q', 'w')
local owner = h[1]
if not owner then
  -- An expired holder of a line hands over at the next call.
  if redis.call('exists', KEYS[3]) == 1 then line_settle(KEYS[1], KEYS[4], KEYS[3], ARGV[3]) end
  return {-1, 0}
end
if owner ~= ARGV[1] then return {-2, 0} end
local n = tonumber(h[2])
local round = tonumber(ARGV[5]) or 0
if round > 0 and (tonumber(h[3]) or 0) ~= round then return {-4, n} end
local held = tonumber(ARGV[2])
local all = ARGV[4] == '1'
if all or n == held then
  if all or n <= 1 then
    redis.call('del', KEYS[1])
    -- A line waits (the line scripts mark the hash, q): its head gets the
    -- lock inside this release.
    if h[4] and line_settle(KEYS[1], KEYS[4], KEYS[3], ARGV[3]) > 0 then
      return {0, 0}
    end
    -- The release is done: a refused PUBLISH (an ACL user without channel
    -- rights) must not turn it into an error. Waiters then poll.
    pcall(redis.call, 'publish', ARGV[3], '1')
    -- Plain waiters: the first one alone (wake_lib.lua).
    if h[5] then L_wake_next(KEYS[1], ARGV[3]) end
    return {0, 0}
  end
  return {1, redis.call('hincrby', KEYS[1], 'n', -1)}
end
if n == held - 1 then return {1, n} end
return {-3, n}

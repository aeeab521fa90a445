-- The plain layout's inspect, in line_inspect.lua's shape: {0, held, fence,
-- depth, ms left (0: no expiry), holder, holders, 0, 0, ms held (-1: not
-- known)}. A peer's key
-- is held by "a peer library (token ...)". KEYS: lock.
--@include plain_lib.lua
local ok, v = pcall(redis.call, 'get', KEYS[1])
if not ok then return redis.error_reply('WRONGTYPE the key ' .. KEYS[1] .. ' is not a string: not a plain lock') end
if not v then return {0, 0, 0, 0, 0, '', 0, 0, 0, -1} end
local left = math.max(redis.call('pttl', KEYS[1]), 0)  -- 0: no expiry (LockInfo::remaining)
local f, _, holder, granted_at = P_parse(v)
if f then
  return {0, 1, f, 1, left, holder, 1, 0, 0, P_held_for(granted_at)}
end
local shown = v
if #shown > 40 then shown = string.sub(shown, 1, 40) .. '...' end
return {0, 1, 0, 1, left, 'a peer library (token ' .. shown .. ')', 1, 0, 0, -1}

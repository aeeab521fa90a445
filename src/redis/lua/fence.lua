-- The next fence from counter `key` (keys.hpp, FenceScope). Every counter
-- starts at the server's clock in microseconds: one that counts from 1 was
-- just made, or made again after it was lost (DEL, FLUSHDB, an allkeys-*
-- eviction, a restart without persistence), so it is raised to the clock
-- and goes on above every fence issued before it (unless the clock went
-- back, or more than one grant per µs was issued for as long as the counter
-- lived). Only then does a grant pay for a TIME. A per-name counter
-- ("...}:f") is raised to the clock on every grant and kept for a day: it
-- may then vanish, and a promoted replica that missed the last increments
-- still issues a larger fence. Below 2^53 (until about the year 2255) a Lua
-- number holds it exactly.
local function L_fence(key, t)
  local f = redis.call('incr', key)
  local per_name = string.sub(key, -3) == '}:f'
  -- 10^12 µs is 1970-01-12: a counter below it was never raised.
  if per_name or f < 1000000000000 then
    t = t or redis.call('time')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    if now > f then
      f = now
      if per_name then
        redis.call('set', key, string.format('%d', now), 'px', 86400000)
      else
        redis.call('set', key, string.format('%d', now))
      end
    elseif per_name then
      redis.call('pexpire', key, 86400000)
    end
  end
  return f
end
-- L_fence for a grant: nil and the error reply to return instead when the
-- counter is no integer (WRONGTYPE, naming it) or the write failed (e.g.
-- OOM under maxmemory: what it is).
local function L_grant_fence(key)
  local ok, fence = pcall(L_fence, key, nil)
  if ok then return fence end
  local err = type(fence) == 'table' and fence.err or tostring(fence)
  if string.find(err, 'WRONGTYPE', 1, true) or string.find(err, 'not an integer', 1, true) then
    return nil, redis.error_reply('WRONGTYPE fence counter ' .. key .. ' is not an integer')
  end
  return nil, redis.error_reply(err)
end

-- dlock's value in the plain layout (keys.hpp): "<fence>:<granted at, the
-- caller's wall clock in ms>:<owner length>:<owner><holder>". P_parse(v):
-- fence, owner, holder, granted at; nil for a value that is not dlock's (a
-- peer library's token).
local function P_parse(v)
  local f, t, n = string.match(v, '^(%d+):(%d*):(%d+):')
  if not f then return nil end
  local start = #f + #t + #n + 4
  local len = tonumber(n)
  if #v < start + len - 1 then return nil end
  return tonumber(f), string.sub(v, start, start + len - 1), string.sub(v, start + len), tonumber(t)
end
-- dlock's value for a grant of `fence` (a string): ARGV as the acquire
-- scripts take it (owner, lease, holder, wall clock in ms).
local function P_value(fence)
  return fence .. ':' .. (ARGV[4] or '') .. ':' .. #ARGV[1] .. ':' .. ARGV[1] .. (ARGV[3] or '')
end
-- Milliseconds since `granted_at` (the caller's wall clock at the grant) by
-- the server's clock, for inspect's "held for"; -1: not known.
local function P_held_for(granted_at)
  if not granted_at then return -1 end
  local t = redis.call('time')
  return math.max(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - granted_at, 0)
end

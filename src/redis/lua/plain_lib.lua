-- dlock's value in the plain layout (keys.hpp): "<fence>:<owner length>:
-- <owner><holder>". P_parse(v): fence, owner, holder; nil for a value that
-- is not dlock's (a peer library's token).
local function P_parse(v)
  local f, n = string.match(v, '^(%d+):(%d+):')
  if not f then return nil end
  local start = #f + #n + 3
  local len = tonumber(n)
  if #v < start + len - 1 then return nil end
  return tonumber(f), string.sub(v, start, start + len - 1), string.sub(v, start + len)
end

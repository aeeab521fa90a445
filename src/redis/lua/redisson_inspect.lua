-- The redisson layout's inspect, in line_inspect.lua's shape: {0, held,
-- fence, depth, ms left (0: no expiry), holder, holders, 0, 0, ms held (-1:
-- not known)}. A Redisson client's hold is "Redisson (holder <field>, count
-- N)". KEYS: lock.
--@include plain_lib.lua
local ok, fields = pcall(redis.call, 'hgetall', KEYS[1])
if not ok then return redis.error_reply('WRONGTYPE the key ' .. KEYS[1] .. ' is not a hash: not a Redisson lock') end
if #fields == 0 then return {0, 0, 0, 0, 0, '', 0, 0, 0, -1} end
local left = math.max(redis.call('pttl', KEYS[1]), 0)  -- 0: no expiry (LockInfo::remaining)
local mine, peer, count, holders = nil, nil, 0, 0
for i = 1, #fields, 2 do
  if fields[i] == 'dlock' then
    mine = fields[i + 1]
  elseif string.find(fields[i], ':', 1, true) and tonumber(fields[i + 1]) then
    -- "<client id>:<thread id>" (Java Redisson) or "<uuid>:<uuid>"
    -- (node-redisson), the hold's re-entry count as its value.
    holders = holders + 1
    peer = peer or fields[i]
    count = count + (tonumber(fields[i + 1]) or 0)
  end
end
local f, _, holder, granted_at = P_parse(mine or '')
if f then
  return {0, 1, f, 1, left, holder, 1, 0, 0, P_held_for(granted_at)}
end
return {0, 1, 0, math.max(count, 1), left,
        'Redisson (holder ' .. (peer or '?') .. ', count ' .. count .. ')', math.max(holders, 1), 0, 0, -1}

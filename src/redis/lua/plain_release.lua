-- The plain layout's release: compare and delete, as every library of
-- that layout releases. KEYS: lock, tombstone. ARGV: owner (wire owner),
-- wake channel, tombstone ms (0: none).
-- Returns {0, 0} freed (and published for dlock's waiters), {-1, 0} not
-- held, {-2, 0} another owner's (a peer's token, or another grant).
--@include plain_lib.lua
local tomb = tonumber(ARGV[3]) or 0
if tomb > 0 then redis.call('set', KEYS[2], '1', 'px', tomb) end
local v = redis.call('get', KEYS[1])
if not v then return {-1, 0} end
local _, owner = P_parse(v)
if owner ~= ARGV[1] then return {-2, 0} end
redis.call('del', KEYS[1])
-- dlock's waiters wake at once; a peer's waiters poll, as they always do.
pcall(redis.call, 'publish', ARGV[2], '1')
return {0, 0}

-- The redisson layout's release: the hold's field decides, as Redisson's
-- unlock does, and a release deletes the hash and publishes Redisson's
-- unlock message ('0') on its channel, which wakes Redisson's waiters and
-- dlock's. KEYS: lock, tombstone. ARGV: owner (wire owner), channel,
-- tombstone ms (0: none), node-redisson's channel when it differs (it
-- braces every name not starting with '{', Java Redisson every name
-- without one) or ''. Returns {0, 0} freed, {-1, 0} not held, {-2, 0}
-- another holder's (a Redisson client's field, or another grant).
--@include redisson_lib.lua
local tomb = tonumber(ARGV[3]) or 0
if tomb > 0 then redis.call('set', KEYS[2], '1', 'px', tomb) end
if redis.call('exists', KEYS[1]) == 0 then return {-1, 0} end
if redis.call('hexists', KEYS[1], R_field(ARGV[1])) == 0 then return {-2, 0} end
redis.call('del', KEYS[1])
pcall(redis.call, 'publish', ARGV[2], '0')
if ARGV[4] and ARGV[4] ~= '' then pcall(redis.call, 'publish', ARGV[4], '0') end
return {0, 0}

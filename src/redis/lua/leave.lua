-- A plain waiter leaves (wake_lib.lua): its call ended without a grant, or
-- a wake-up came for an attempt that is over. If the lock was reserved for
-- it, the next waiter is woken now rather than when the reservation ends.
-- KEYS: lock. ARGV: member, wake channel. Returns 1 if it was the woken one.
--@include wake_lib.lua
redis.call('zrem', KEYS[1] .. ':w', ARGV[1])
if redis.call('get', KEYS[1] .. ':r') ~= ARGV[1] then return 0 end
redis.call('del', KEYS[1] .. ':r')
if redis.call('exists', KEYS[1]) == 0 then L_wake_next(KEYS[1], ARGV[2]) end
return 1

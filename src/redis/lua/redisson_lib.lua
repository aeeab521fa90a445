-- The redisson layout (keys.hpp): the lock is Redisson's RLock hash at the
-- name, a field "<client id>:<thread id>" per holder holding its re-entry
-- count, PEXPIRE its lease. dlock's hold is one such field, R_field(wire
-- owner): a UUID made of the owner's SHA-1 and thread 1, count 1 (dlock's
-- client counts re-entry), and a field 'dlock' of plain_lib.lua's shape
-- (fence, granted at, owner, holder), which Redisson never reads.
local function R_field(owner)
  local h = redis.sha1hex(owner)
  return string.sub(h, 1, 8) .. '-' .. string.sub(h, 9, 12) .. '-' .. string.sub(h, 13, 16) .. '-' ..
             string.sub(h, 17, 20) .. '-' .. string.sub(h, 21, 32) .. ':1'
end

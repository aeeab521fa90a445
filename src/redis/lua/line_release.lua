-- The holder keyed by owner + grant: the exclusive one in the lock hash, or
-- a shared one in the line key.
-- KEYS and ARGV: line_scripts.hpp, line_release_script().
--@include fence.lua
--@include line_lib.lua
--@include wake_lib.lua
local lock, q, fence = KEYS[1], KEYS[3], KEYS[4]
local me, held, all = ARGV[1], tonumber(ARGV[2]), ARGV[4] == '1'
local now = L_now()
local st = L_load(q)
L_purge(st, now)
local handed = {}
L_promote(st, lock, fence, now, handed)
local tomb = tonumber(ARGV[5]) or 0
if tomb > 0 then redis.call('set', KEYS[2], '1', 'px', tomb) end
local x = L_xholder(lock, now)
local mine_x = x ~= nil and x.o == me
local si = nil
for i, h in ipairs(st.s) do if h.o == me then si = i end end
local res
local freed = false
if not mine_x and not si then
  res = x and {-2, 0} or {-1, 0}
else
  local n = mine_x and x.n or st.s[si].n
  if all or n == held then
    local left = all and 0 or n - 1
    if left == 0 then
      if mine_x then redis.call('del', lock) else table.remove(st.s, si) end
      L_promote(st, lock, fence, now, handed)
      freed = true
    elseif mine_x then
      redis.call('hincrby', lock, 'n', -1)
    else
      st.s[si].n = left
    end
    res = {left == 0 and 0 or 1, left}
  elseif n == held - 1 then
    res = {1, n}
  else
    res = {-3, n}
  end
end
L_save(q, st, lock)
L_announce(ARGV[3], handed, st)
if freed and #handed == 0 then
  pcall(redis.call, 'publish', ARGV[3], '1')
  -- A plain waiter behind the line, once nobody holds it at all.
  if #st.s == 0 and redis.call('exists', lock) == 0 then L_wake_next(lock, ARGV[3]) end
end
return res

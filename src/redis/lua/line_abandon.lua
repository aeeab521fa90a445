-- KEYS and ARGV: line_scripts.hpp, line_abandon_script().
--@include fence.lua
--@include line_lib.lua
--@include wake_lib.lua
local lock, q, fence = KEYS[1], KEYS[3], KEYS[4]
local me, held = ARGV[1], tonumber(ARGV[2])
local now = L_now()
local st = L_load(q)
L_purge(st, now)
local handed = {}
L_promote(st, lock, fence, now, handed)
local line = {}
for _, w in ipairs(st.w) do if w.o ~= me then line[#line + 1] = w end end
st.w = line
local tomb = tonumber(ARGV[4]) or 0
if tomb > 0 then redis.call('set', KEYS[2], '1', 'px', tomb) end
-- Only the level the abandoned attempt may have added.
local x = L_xholder(lock, now)
local si = nil
for i, h in ipairs(st.s) do if h.o == me then si = i end end
local freed = false
if x and x.o == me and x.n == held + 1 then
  if held == 0 then
    redis.call('del', lock)
    freed = true
  else
    redis.call('hincrby', lock, 'n', -1)
  end
elseif si and st.s[si].n == held + 1 then
  if held == 0 then
    table.remove(st.s, si)
    freed = true
  else
    st.s[si].n = held
  end
end
if freed then L_promote(st, lock, fence, now, handed) end
handed = L_without(handed, me)
-- The line may have moved even when nothing was held (the abandoned waiter
-- was its head).
L_promote(st, lock, fence, now, handed)
L_save(q, st, lock)
L_announce(ARGV[3], handed, st)
if freed and #handed == 0 then
  pcall(redis.call, 'publish', ARGV[3], '1')
  -- A plain waiter behind the line, once nobody holds it at all.
  if #st.s == 0 and redis.call('exists', lock) == 0 then L_wake_next(lock, ARGV[3]) end
end
return 1

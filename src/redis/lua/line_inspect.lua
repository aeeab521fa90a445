-- KEYS and ARGV: line_scripts.hpp, line_inspect_script().
--@include fence.lua
--@include line_lib.lua
local lock, q, fence = KEYS[1], KEYS[2], KEYS[3]
local now = L_now()
local st = L_load(q)
L_purge(st, now)
local handed = {}
L_promote(st, lock, fence, now, handed)
L_save(q, st, lock)
L_announce(ARGV[1], handed, st)
local x = L_xholder(lock, now)
local first = nil
if x then first = {f = x.f or 0, n = x.n or 0, i = x.i, e = x.e, s = 0, t = x.t} end
for _, h in ipairs(st.s) do
  if not first or h.f < first.f then first = {f = h.f, n = h.n, i = h.i, e = h.e, s = 1, t = h.t} end
end
local is_line = (redis.call('exists', q) == 1 or redis.call('hexists', lock, 'i') == 1) and 1 or 0
-- Waiting: the line's, and the plain waiters queued beside it (wake_lib.lua).
local waiting = #st.w + redis.call('zcard', lock .. ':w')
if not first then return {is_line, 0, 0, 0, 0, '', 0, 0, waiting, -1} end
local left = 0
if first.e >= 0 then left = math.max(first.e - now, 0) end
local since = -1
if first.t then since = math.max(now - first.t, 0) end
return {is_line, 1, first.f, first.n, left, first.i, #st.s + (x and 1 or 0), first.s, waiting, since}

-- KEYS and ARGV: line_scripts.hpp, line_acquire_script().
--@include fence.lua
--@include line_lib.lua
local lease = tonumber(ARGV[2])
if not lease or lease <= 0 or lease > 1000000000000 then
  return redis.error_reply('ERR dlock: lease out of range: ' .. ARGV[2])
end
local lock, fence, q = KEYS[1], KEYS[2], KEYS[4]
local me, held, mode = ARGV[1], tonumber(ARGV[3]), ARGV[4]
local permits, queued, info = tonumber(ARGV[5]) or 0, ARGV[6] == '1', ARGV[7]
local now = L_now()
local st = L_load(q)
L_purge(st, now)
local handed = {}
L_promote(st, lock, fence, now, handed)
local function done(res)
  L_save(q, st, lock)
  L_announce(ARGV[8], handed, st)
  return res
end
local x = L_xholder(lock, now)
local si = nil
for i, h in ipairs(st.s) do if h.o == me then si = i end end
local mine_x = x ~= nil and x.o == me
if mine_x or si then
  -- Granted already: a re-entry, a replay, or this caller's own hand-over.
  handed = L_without(handed, me)
  local n = mine_x and x.n or st.s[si].n
  if n ~= held and n ~= held + 1 then return done({3, n, 0}) end
  if mine_x then
    if n == held then n = redis.call('hincrby', lock, 'n', 1) end
    local ttl = redis.call('pttl', lock)
    if ttl >= 0 and ttl < lease then redis.call('pexpire', lock, lease) end
    return done({1, x.f, n})
  end
  local h = st.s[si]
  if n == held then
    n = n + 1
    h.n = n
  end
  if h.e < now + lease then h.e = now + lease end
  return done({1, h.f, n})
end
if held > 0 or redis.call('exists', KEYS[3]) == 1 then return done({2, 0, 0}) end
local who = L_owner_of(me)
if mode == 'x' then
  for _, h in ipairs(st.s) do
    if L_owner_of(h.o) == who then return done({6, 0, 0}) end
  end
elseif x and L_owner_of(x.o) == who then
  return done({6, 1, 0})
end
if mode == 's' then
  local any = #st.s > 0
  for _, w in ipairs(st.w) do if w.m == 's' then any = true end end
  if any and st.p ~= permits then return done({5, st.p, 0}) end
  if not any then st.p = permits end
end
local place = nil
for i, w in ipairs(st.w) do
  if w.o == me then
    place = i
    break
  end
end
if (place == 1 or #st.w == 0) and L_compatible(st, lock, mode) then
  if place then table.remove(st.w, place) end
  local was_free = x == nil and #st.s == 0
  local f = L_grant(st, lock, fence, me, mode, lease, now, info)
  -- A free lock changed hands without a release: observers look again.
  if was_free then pcall(redis.call, 'publish', ARGV[8], 'c') end
  return done({1, f, 1})
end
if queued then
  if place then
    st.w[place].e = now + lease
    st.w[place].c = ARGV[9] or ''
  else
    st.w[#st.w + 1] = {o = me, m = mode, t = st.k, l = lease, e = now + lease, i = info, c = ARGV[9] or ''}
    st.k = st.k + 1
  end
end
return done({0, L_hint(st, x, now, queued and lease or nil), 0})

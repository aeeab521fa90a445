-- The helpers every line script shares (core/lock_line.cpp's purge, promote,
-- compatible). State of the line key: p = permits, k = next ticket,
-- s = shared holders {o, n = depth, f = fence, e = expiry ms, i = info},
-- w = waiters oldest first {o, m = 'x' | 's', t = ticket, l = lease ms,
-- e = expiry ms, i = info, c = its client's id ('' or none: an older
-- client, told on the name's channel)}. The exclusive holder is the lock hash; its
-- expiry is the key's own.
local function L_now()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function L_load(q)
  local raw = redis.call('get', q)
  if not raw then return {p = 0, k = 1, s = {}, w = {}} end
  local st = cmsgpack.unpack(raw)
  st.p = tonumber(st.p) or 0
  st.k = tonumber(st.k) or 1
  st.s = st.s or {}
  st.w = st.w or {}
  return st
end
-- The key lives as long as its latest entry; empty, it is gone. An
-- exclusive holder beside a line is marked (q = 1), so that the plain
-- release, which reads the hash anyway, knows to hand over without another
-- command (a mark left after the line went costs one settle).
local function L_save(q, st, lock)
  if #st.s == 0 and #st.w == 0 then
    redis.call('del', q)
    return
  end
  local last = 0
  for _, h in ipairs(st.s) do if h.e > last then last = h.e end end
  for _, w in ipairs(st.w) do if w.e > last then last = w.e end end
  redis.call('set', q, cmsgpack.pack(st), 'pxat', string.format('%d', last))
  if #st.w > 0 and redis.call('exists', lock) == 1 then redis.call('hset', lock, 'q', 1) end
end
local function L_live(list, now)
  local out = {}
  for _, e in ipairs(list) do if e.e > now then out[#out + 1] = e end end
  return out
end
local function L_purge(st, now)
  st.s = L_live(st.s, now)
  st.w = L_live(st.w, now)
end
-- The exclusive holder (a plain or a line one), or nil. e = -1: no expiry.
-- i: what it said of itself (a line's in 'i', a plain grant's in 'd');
-- t: when it was granted (server ms), nil if unknown.
local function L_xholder(lock, now)
  local h = redis.call('hmget', lock, 'o', 'n', 'f', 'i', 'd', 't')
  if not h[1] then return nil end
  local ttl = redis.call('pttl', lock)
  return {o = h[1], n = tonumber(h[2]), f = tonumber(h[3]), i = h[4] or h[5] or '', t = tonumber(h[6]),
          e = ttl >= 0 and now + ttl or -1}
end
local function L_compatible(st, lock, mode)
  if redis.call('exists', lock) == 1 then return false end
  if mode == 'x' then return #st.s == 0 end
  return st.p == 0 or #st.s < st.p
end
local function L_grant(st, lock, fence, o, mode, lease, now, info)
  local f = L_fence(fence)
  if mode == 'x' then
    redis.call('hset', lock, 'o', o, 'n', 1, 'f', f, 'i', info, 't', string.format('%d', now))
    redis.call('pexpire', lock, lease)
  else
    st.s[#st.s + 1] = {o = o, n = 1, f = f, e = now + lease, i = info, t = now}
  end
  return f
end
local function L_promote(st, lock, fence, now, handed)
  while #st.w > 0 and L_compatible(st, lock, st.w[1].m) do
    local w = table.remove(st.w, 1)
    handed[#handed + 1] = {o = w.o, l = w.l, c = w.c, f = L_grant(st, lock, fence, w.o, w.m, w.l, now, w.i)}
  end
end
-- Each hand-over goes to its recipient's client alone ("<channel>:<id>"),
-- and to the client of the waiter now first in line (`st`'s): should the
-- recipient be dead, that one looks again when its lease ends rather than
-- at its own heartbeat. The name's own channel (observers) hears that the
-- holders changed.
local function L_announce(channel, handed, st)
  local addressed, last = false, nil
  for _, h in ipairs(handed) do
    local to = channel
    if h.c and h.c ~= '' then
      to = channel .. ':' .. h.c
      addressed = true
    end
    last = 'h:' .. string.format('%d', h.f) .. ':' .. string.format('%d', h.l) .. ':' .. h.o
    pcall(redis.call, 'publish', to, last)
  end
  if not addressed then return end
  pcall(redis.call, 'publish', channel, 'c')
  local head = st.w[1]
  if head and head.c and head.c ~= '' then pcall(redis.call, 'publish', channel .. ':' .. head.c, last) end
end
local function L_without(handed, me)
  local out = {}
  for _, h in ipairs(handed) do if h.o ~= me then out[#out + 1] = h end end
  return out
end
-- The owner of a wire owner "<owner>/<grant>".
local function L_owner_of(o)
  return string.match(o, '^(.*)/') or o
end
-- How long a caller is told to wait: until the first holder's expiry (the
-- first waiter's when nobody holds), at most a third of a queued caller's
-- lease (its heartbeat). -1: until an event.
local function L_hint(st, x, now, queued_lease)
  local u = nil
  local function low(e) if e >= 0 and (u == nil or e < u) then u = e end end
  if x then low(x.e) end
  for _, h in ipairs(st.s) do low(h.e) end
  if not x and #st.s == 0 then for _, w in ipairs(st.w) do low(w.e) end end
  local after = -1
  if u then after = math.max(u - now, 0) end
  if queued_lease then
    local beat = math.max(math.floor(queued_lease / 3), 1)
    if after < 0 or beat < after then after = beat end
  end
  return after
end

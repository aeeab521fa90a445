-- The acquire script of dlock 0.2.0, as the library sent it (its includes
-- expanded). Kept to prove that clients before and after a change of the
-- scripts exclude each other on one server during an upgrade
-- (lock_scripts_test.cpp). Never edit it.
-- The owner the scripts see is the caller's owner plus the id of one grant
-- ("<owner>/<grant hex>"), so a call can only touch the grant it belongs to:
-- a release delayed in the network cannot delete the same owner's next grant.
--
-- A grant never re-creates a hold the caller believes it has (held > 0): that
-- would hide a break in mutual exclusion. A replayed call (reply lost, sent
-- again) finds depth == held + 1 and is answered without applying it twice;
-- its lease then counts from the replay, as the caller's validity does. The
-- hold records the attempt number that last granted it ('r'): an older
-- attempt's replay does not take it back, and an undo names its attempt.
-- KEYS[3] is the grant's tombstone: a release or undo of a grant whose
-- request may still be in the network leaves it, so that stray copy cannot
-- re-create the lock after it was released ({2, 0, 0}: given up).
-- The lease is checked before anything is written: a key without a TTL
-- would be held by nobody, forever.
-- The fence counter is its own key so it survives the lock key's expiry
-- (keys.hpp: one per prefix, or one per name in a cluster).
-- The next fence from counter `key` (keys.hpp, FenceScope). A per-name
-- counter ("...}:f") is raised to the server's clock in microseconds and
-- kept for a day: it may then vanish, and a promoted replica that missed
-- the last increments still issues a larger fence. Below 2^53 (until about
-- the year 2255) a Lua number holds it exactly.
local function L_fence(key, t)
  local f = redis.call('incr', key)
  if string.sub(key, -3) == '}:f' then
    -- Per name: floored by the server's clock in µs (`t`, a TIME reply the
    -- caller may have), kept for a day; the floor's SET carries the expiry.
    t = t or redis.call('time')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    if now > f then
      f = now
      redis.call('set', key, string.format('%d', now), 'px', 86400000)
    else
      redis.call('pexpire', key, 86400000)
    end
  end
  return f
end
local lease = tonumber(ARGV[2])
if not lease or lease <= 0 or lease > 1000000000000 then
  return redis.error_reply('ERR dlock: lease out of range: ' .. ARGV[2])
end
local owner = redis.call('hget', KEYS[1], 'o')
local held = tonumber(ARGV[3])
local round = tonumber(ARGV[4]) or 0
if not owner then
  -- The lock key, the tombstone and the line in one command: none of them,
  -- the common case, is a fresh grant (each redis.call costs the server
  -- more than the Lua around it). A line beside it (shared holders,
  -- waiters) is settled first (an expired holder hands over), and a caller
  -- outside the line waits behind it.
  if redis.call('exists', KEYS[1], KEYS[3], KEYS[4]) > 0 then
    if redis.call('exists', KEYS[1]) == 1 then
      return redis.error_reply('WRONGTYPE lock key is a hash without an owner field')
    end
    if held > 0 then return {2, 0, 0} end
    if redis.call('exists', KEYS[3]) == 1 then return {2, 0, 0} end
-- `line_settle(lock, fence, q, channel, me)` (line_scripts.hpp), with the
-- line helpers inside it: a script that runs it only sometimes defines them
-- only then.
local function line_settle(lock, fence, q, channel, me)
-- The helpers every line script shares (core/lock_line.cpp's purge, promote,
-- compatible). State of the line key: p = permits, k = next ticket,
-- s = shared holders {o, n = depth, f = fence, e = expiry ms, i = info},
-- w = waiters oldest first {o, m = 'x' | 's', t = ticket, l = lease ms,
-- e = expiry ms, i = info}. The exclusive holder is the lock hash; its
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
    handed[#handed + 1] = {o = w.o, l = w.l, f = L_grant(st, lock, fence, w.o, w.m, w.l, now, w.i)}
  end
end
local function L_announce(channel, handed)
  for _, h in ipairs(handed) do
    pcall(redis.call, 'publish', channel,
          'h:' .. string.format('%d', h.f) .. ':' .. string.format('%d', h.l) .. ':' .. h.o)
  end
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
  local now = L_now()
  local st = L_load(q)
  L_purge(st, now)
  local handed = {}
  L_promote(st, lock, fence, now, handed)
  L_save(q, st, lock)
  L_announce(channel, handed)
  local x = L_xholder(lock, now)
  if not x and #st.s == 0 and #st.w == 0 then return #handed, nil, false end
  -- An exclusive caller that holds it shared would wait for itself.
  local conflict = false
  if me then
    local who = L_owner_of(me)
    for _, h in ipairs(st.s) do if L_owner_of(h.o) == who then conflict = true end end
  end
  return #handed, L_hint(st, x, now, nil), conflict
end
    local _, busy, conflict = line_settle(KEYS[1], KEYS[2], KEYS[4], ARGV[5], ARGV[1])
    if conflict then return {6, 0, 0} end
    if busy then return {0, busy, 0} end
  elseif held > 0 then
    return {2, 0, 0}
  end
  -- Who holds it and since when (server time), for inspect: 'd', not the
  -- line's 'i', which marks a line's holder. Its TIME serves the fence's
  -- floor too (L_fence asks for one itself where it needs one).
  local described = ARGV[6] and ARGV[6] ~= ''
  local t = described and redis.call('time') or nil
  local ok, fence = pcall(L_fence, KEYS[2], t)
  if not ok then
    local err = type(fence) == 'table' and fence.err or tostring(fence)
    if string.find(err, 'WRONGTYPE', 1, true) or string.find(err, 'not an integer', 1, true) then
      return redis.error_reply('WRONGTYPE fence counter ' .. KEYS[2] .. ' is not an integer')
    end
    return redis.error_reply(err)  -- e.g. OOM (maxmemory): what it is
  end
  local fields = {'o', ARGV[1], 'n', 1, 'f', fence}
  if round > 0 then
    fields[7] = 'r'
    fields[8] = round
  end
  if described then
    local n = #fields
    fields[n + 1] = 'd'
    fields[n + 2] = ARGV[6]
    fields[n + 3] = 't'
    fields[n + 4] = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  end
  redis.call('hset', KEYS[1], unpack(fields))
  redis.call('pexpire', KEYS[1], lease)
  return {1, fence, 1}
end
if owner == ARGV[1] then
  local n = tonumber(redis.call('hget', KEYS[1], 'n'))
  if n ~= held and n ~= held + 1 then return {3, n, 0} end
  if n == held then n = redis.call('hincrby', KEYS[1], 'n', 1) end
  if n == held + 1 and round >= (tonumber(redis.call('hget', KEYS[1], 'r')) or 0) then
    redis.call('hset', KEYS[1], 'r', round)
    if redis.call('pttl', KEYS[1]) < lease then redis.call('pexpire', KEYS[1], lease) end
  end
  return {1, tonumber(redis.call('hget', KEYS[1], 'f')), n}
end
-- Another grant holds it: a caller that believes it holds (held > 0) lost
-- its hold and is told so at once, not left waiting for a level it can
-- never be given.
if held > 0 then return {2, 0, 0} end
return {0, redis.call('pttl', KEYS[1]), 0}

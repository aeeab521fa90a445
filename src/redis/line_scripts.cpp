#include "redis/line_scripts.hpp"

#include <string>

namespace dlock::redis {
namespace {

// The helpers every line script shares (core/lock_line.cpp's purge, promote,
// compatible). State of the line key: p = permits, k = next ticket,
// s = shared holders {o, n = depth, f = fence, e = expiry ms, i = info},
// w = waiters oldest first {o, m = 'x' | 's', t = ticket, l = lease ms,
// e = expiry ms, i = info}. The exclusive holder is the lock hash; its
// expiry is the key's own.
constexpr std::string_view kLib = R"lua(
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
)lua";

constexpr std::string_view kSettleHead = "local function line_settle(lock, fence, q, channel, me)\n";
constexpr std::string_view kSettleBody = R"lua(
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
)lua";

constexpr std::string_view kAcquire = R"lua(
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
  L_announce(ARGV[8], handed)
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
  else
    st.w[#st.w + 1] = {o = me, m = mode, t = st.k, l = lease, e = now + lease, i = info}
    st.k = st.k + 1
  end
end
return done({0, L_hint(st, x, now, queued and lease or nil), 0})
)lua";

// The holder keyed by owner + grant: the exclusive one in the lock hash, or
// a shared one in the line key.
constexpr std::string_view kRelease = R"lua(
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
L_announce(ARGV[3], handed)
if freed and #handed == 0 then pcall(redis.call, 'publish', ARGV[3], '1') end
return res
)lua";

constexpr std::string_view kAbandon = R"lua(
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
L_announce(ARGV[3], handed)
if freed and #handed == 0 then pcall(redis.call, 'publish', ARGV[3], '1') end
return 1
)lua";

constexpr std::string_view kInspect = R"lua(
local lock, q, fence = KEYS[1], KEYS[2], KEYS[3]
local now = L_now()
local st = L_load(q)
L_purge(st, now)
local handed = {}
L_promote(st, lock, fence, now, handed)
L_save(q, st, lock)
L_announce(ARGV[1], handed)
local x = L_xholder(lock, now)
local first = nil
if x then first = {f = x.f or 0, n = x.n or 0, i = x.i, e = x.e, s = 0, t = x.t} end
for _, h in ipairs(st.s) do
  if not first or h.f < first.f then first = {f = h.f, n = h.n, i = h.i, e = h.e, s = 1, t = h.t} end
end
local is_line = (redis.call('exists', q) == 1 or redis.call('hexists', lock, 'i') == 1) and 1 or 0
if not first then return {is_line, 0, 0, 0, 0, '', 0, 0, #st.w, -1} end
local left = 0
if first.e >= 0 then left = math.max(first.e - now, 0) end
local since = -1
if first.t then since = math.max(now - first.t, 0) end
return {is_line, 1, first.f, first.n, left, first.i, #st.s + (x and 1 or 0), first.s, #st.w, since}
)lua";

// The next fence from counter `key` (keys.hpp, FenceScope). A per-name
// counter ("...}:f") is raised to the server's clock in microseconds and
// kept for a day: it may then vanish, and a promoted replica that missed
// the last increments still issues a larger fence. Below 2^53 (until about
// the year 2255) a Lua number holds it exactly.
constexpr std::string_view kFence = R"lua(
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
)lua";

std::string with_lib(std::string_view body) {
  std::string s(kFence);
  s += kLib;
  s += body;
  return s;
}

}  // namespace

std::string_view line_settle_chunk() {
  static const std::string chunk = std::string(kSettleHead) + std::string(kLib) + std::string(kSettleBody);
  return chunk;
}

std::string_view line_library() { return kLib; }

std::string_view fence_chunk() { return kFence; }

const Script& line_acquire_script() {
  static const std::string body = with_lib(kAcquire);
  static const Script s{body, script_sha1(body)};
  return s;
}
const Script& line_release_script() {
  static const std::string body = with_lib(kRelease);
  static const Script s{body, script_sha1(body)};
  return s;
}
const Script& line_abandon_script() {
  static const std::string body = with_lib(kAbandon);
  static const Script s{body, script_sha1(body)};
  return s;
}
const Script& line_inspect_script() {
  static const std::string body = with_lib(kInspect);
  static const Script s{body, script_sha1(body)};
  return s;
}

}  // namespace dlock::redis

-- pcall keeps one foreign key from failing the whole batch. ARGV: owner,
-- lease, kind per call ('p' plain: one key; 'l' a line's hold or waiter:
-- the lock and its line key, core/lock_line.cpp's line_renew; 'k' the
-- plain layout's string key, 'h' the redisson layout's hash, keys.hpp).
--@include fence.lua
--@include line_lib.lua
--@include plain_lib.lua
--@include redisson_lib.lua
local out = {}
local ki = 1
local now = nil
for i = 1, #ARGV / 3 do
  local me, lease, line = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i] == 'l'
  local key = KEYS[ki]
  local q = line and KEYS[ki + 1] or nil
  ki = ki + (line and 2 or 1)
  local ok, owner
  if ARGV[3 * i] == 'k' then
    local v
    ok, v = pcall(redis.call, 'get', key)
    if ok and v then
      local _, o = P_parse(v)
      owner = o or ''  -- a peer's token: taken
    end
  elseif ARGV[3 * i] == 'h' then
    local has
    ok, has = pcall(redis.call, 'hexists', key, R_field(me))
    if ok and has == 1 then
      owner = me
    elseif ok and redis.call('exists', key) == 1 then
      owner = ''  -- another holder's field: taken
    end
  else
    ok, owner = pcall(redis.call, 'hget', key, 'o')
  end
  if not ok then
    out[i] = 3
  elseif owner == me then
    redis.call('pexpire', key, lease)
    out[i] = 1
  elseif not line then
    out[i] = owner and 2 or 0
  else
    now = now or L_now()
    local ok2, st = pcall(L_load, q)
    if not ok2 then
      out[i] = 3
    else
      L_purge(st, now)
      local found = false
      for _, h in ipairs(st.s) do
        if h.o == me then
          h.e = now + tonumber(lease)
          found = true
        end
      end
      for _, w in ipairs(st.w) do
        if w.o == me then
          w.e = now + tonumber(lease)
          found = true
        end
      end
      L_save(q, st, key)
      if found then out[i] = 1 elseif owner then out[i] = 2 else out[i] = 0 end
    end
  end
end
return out

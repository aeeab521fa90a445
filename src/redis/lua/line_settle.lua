-- `line_settle(lock, fence, q, channel, me)` (line_scripts.hpp), with the
-- line helpers inside it: a script that runs it only sometimes defines them
-- only then.
local function line_settle(lock, fence, q, channel, me)
--@include line_lib.lua
  local now = L_now()
  local st = L_load(q)
  L_purge(st, now)
  local handed = {}
  L_promote(st, lock, fence, now, handed)
  L_save(q, st, lock)
  L_announce(channel, handed, st)
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

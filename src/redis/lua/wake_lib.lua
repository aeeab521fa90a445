-- A plain lock's waiters, woken one at a time (the dlock layout). Beside
-- the lock key, in its hash tag (so in its cluster slot):
--   <lock>:w  a sorted set of "<client id>:<attempt>", in the order they
--             first found the lock busy (acquire.lua joins a caller that
--             will wait);
--   <lock>:r  the member a release woke, for L_RESERVE_MS: only it may take
--             the free lock meanwhile, so a fresh arrival (the releaser
--             itself, looping) cannot barge past the line.
-- The lock hash's field 'w' says a waiter may be queued: a release without
-- it wakes nobody and costs no command more than before.
-- Member "<id>:<attempt>" hears on "<lock channel>:<id>": 'w:<attempt>'
-- (your turn), 's:<attempt>:<ms>' (stand by: look again after ms, in case
-- the woken one never comes). A member nobody listens for (its client is
-- gone) is dropped and the next one is tried.
local L_RESERVE_MS = 500
local function L_split(member)
  return string.match(member, '^(.*):([^:]+)$')
end
-- Joins `member` to the waiters unless it is there; the set outlives the
-- wait it was told (ttl ms, -1: none) by a minute. `front`: a caller that
-- waited already and is not there was taken out by a release (woken, but
-- too late for its reservation; or not yet listening): it goes back to the
-- front, not the end, so a turn missed costs it one grant, not a round.
local function L_join(lock, member, ttl, front)
  local w = lock .. ':w'
  if not redis.call('zscore', w, member) then
    local edge = redis.call('zrange', w, front and 0 or -1, front and 0 or -1, 'withscores')
    redis.call('zadd', w, (tonumber(edge[2]) or 0) + (front and -1 or 1), member)
  end
  local keep = math.max(ttl, 0) + 60000
  if redis.call('pttl', w) < keep then redis.call('pexpire', w, keep) end
end
-- Wakes the first waiter still listening and reserves the lock for it.
local function L_wake_next(lock, channel)
  local w = lock .. ':w'
  for _ = 1, 16 do
    local head = redis.call('zpopmin', w)[1]
    if not head then return end
    local id, attempt = L_split(head)
    if id then
      local ok, n = pcall(redis.call, 'publish', channel .. ':' .. id, 'w:' .. attempt)
      if ok and n > 0 then
        redis.call('set', lock .. ':r', head, 'px', L_RESERVE_MS)
        local nxt = redis.call('zrange', w, 0, 0)[1]
        local id2, attempt2
        if nxt then id2, attempt2 = L_split(nxt) end
        if id2 then
          pcall(redis.call, 'publish', channel .. ':' .. id2, 's:' .. attempt2 .. ':' .. L_RESERVE_MS)
        end
        return
      end
    end
  end
end

#include "redis/scripts.hpp"

#include <openssl/sha.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "redis/line_scripts.hpp"

namespace dlock::redis {

std::string script_sha1(std::string_view body) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(body.data()), body.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 0xF];
  }
  return out;
}

namespace {

struct ShardedVariant {
  std::string body;
  Script script;
};

std::unique_ptr<ShardedVariant> sharded_variant_of(const Script& s) {
  auto v = std::make_unique<ShardedVariant>();
  v->body = std::string(s.body);
  static constexpr std::string_view kFrom = "redis.call, 'publish'", kTo = "redis.call, 'spublish'";
  for (auto at = v->body.find(kFrom); at != std::string::npos; at = v->body.find(kFrom, at + kTo.size()))
    v->body.replace(at, kFrom.size(), kTo);
  v->script = Script{v->body, script_sha1(v->body)};
  return v;
}

}  // namespace

// Every lock call passes here when sharded, from any thread: the backend's
// scripts are made once, and read without a lock after.
const Script& with_sharded_publish(const Script& s) {
  using Table = std::map<const Script*, std::unique_ptr<ShardedVariant>>;
  static const Table known = [] {
    Table t;
    for (const Script* x : {&acquire_script(), &release_script(), &renew_script(), &line_acquire_script(),
                            &line_release_script(), &line_abandon_script(), &line_inspect_script()})
      t.emplace(x, sharded_variant_of(*x));
    return t;
  }();
  if (auto it = known.find(&s); it != known.end()) return it->second->script;
  static std::mutex mu;
  static Table others;  // never freed: as the originals
  std::lock_guard lk(mu);
  auto& v = others[&s];
  if (!v) v = sharded_variant_of(s);
  return v->script;
}

namespace {

// The owner the scripts see is the caller's owner plus the id of one grant
// ("<owner>/<grant hex>"), so a call can only touch the grant it belongs to:
// a release delayed in the network cannot delete the same owner's next grant.
//
// A grant never re-creates a hold the caller believes it has (held > 0): that
// would hide a break in mutual exclusion. A replayed call (reply lost, sent
// again) finds depth == held + 1 and is answered without applying it twice;
// its lease then counts from the replay, as the caller's validity does. The
// hold records the attempt number that last granted it ('r'): an older
// attempt's replay does not take it back, and an undo names its attempt.
// KEYS[3] is the grant's tombstone: a release or undo of a grant whose
// request may still be in the network leaves it, so that stray copy cannot
// re-create the lock after it was released ({2, 0, 0}: given up).
// The lease is checked before anything is written: a key without a TTL
// would be held by nobody, forever.
// The fence counter is its own key so it survives the lock key's expiry
// (keys.hpp: one per prefix, or one per name in a cluster).
constexpr std::string_view kAcquireHead = R"lua(
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
)lua";
constexpr std::string_view kAcquireTail = R"lua(
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
return {0, redis.call('pttl', KEYS[1]), 0}
)lua";

constexpr std::string_view kRelease = R"lua(
local tomb = tonumber(ARGV[6]) or 0
if tomb > 0 then redis.call('set', KEYS[2], '1', 'px', tomb) end
local h = redis.call('hmget', KEYS[1], 'o', 'n', 'r', 'q')
local owner = h[1]
if not owner then
  -- An expired holder of a line hands over at the next call.
  if redis.call('exists', KEYS[3]) == 1 then line_settle(KEYS[1], KEYS[4], KEYS[3], ARGV[3]) end
  return {-1, 0}
end
if owner ~= ARGV[1] then return {-2, 0} end
local n = tonumber(h[2])
local round = tonumber(ARGV[5]) or 0
if round > 0 and (tonumber(h[3]) or 0) ~= round then return {-4, n} end
local held = tonumber(ARGV[2])
local all = ARGV[4] == '1'
if all or n == held then
  if all or n <= 1 then
    redis.call('del', KEYS[1])
    -- A line waits (the line scripts mark the hash, q): its head gets the
    -- lock inside this release.
    if h[4] and line_settle(KEYS[1], KEYS[4], KEYS[3], ARGV[3]) > 0 then
      return {0, 0}
    end
    -- The release is done: a refused PUBLISH (an ACL user without channel
    -- rights) must not turn it into an error. Waiters then poll.
    pcall(redis.call, 'publish', ARGV[3], '1')
    return {0, 0}
  end
  return {1, redis.call('hincrby', KEYS[1], 'n', -1)}
end
if n == held - 1 then return {1, n} end
return {-3, n}
)lua";

// pcall keeps one foreign key from failing the whole batch. ARGV: owner,
// lease, kind per call ('p' plain: one key; 'l' a line's hold or waiter:
// the lock and its line key, core/lock_line.cpp's line_renew).
constexpr std::string_view kRenew = R"lua(
local out = {}
local ki = 1
local now = nil
for i = 1, #ARGV / 3 do
  local me, lease, line = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i] == 'l'
  local key = KEYS[ki]
  local q = line and KEYS[ki + 1] or nil
  ki = ki + (line and 2 or 1)
  local ok, owner = pcall(redis.call, 'hget', key, 'o')
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
)lua";

}  // namespace

const Script& acquire_script() {
  static const std::string body = std::string(fence_chunk()) + std::string(kAcquireHead) +
                                  std::string(line_settle_chunk()) + std::string(kAcquireTail);
  static const Script s{body, script_sha1(body)};
  return s;
}
// line_settle is defined once per call (one closure); its helpers only when
// it runs.
const Script& release_script() {
  static const std::string body = std::string(fence_chunk()) + std::string(line_settle_chunk()) + std::string(kRelease);
  static const Script s{body, script_sha1(body)};
  return s;
}
const Script& renew_script() {
  static const std::string body = std::string(fence_chunk()) + std::string(line_library()) + std::string(kRenew);
  static const Script s{body, script_sha1(body)};
  return s;
}

}  // namespace dlock::redis

// The lock calls as script invocations (which script, its keys and
// arguments) and the scripts' replies parsed back into outcomes: the same
// for the I/O thread's path and the blocking fast path. No I/O.
#ifndef DLOCK_REDIS_SCRIPT_CALLS_HPP_
#define DLOCK_REDIS_SCRIPT_CALLS_HPP_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backend.hpp"
#include "redis/keys.hpp"
#include "redis/resp.hpp"
#include "redis/scripts.hpp"

namespace dlock::redis {

// What the scripts store as the owner: one grant of one owner,
// "<owner>/<grant>" with the grant id in base64url (at most 11 characters:
// every held lock stores it, so its length is Redis memory).
std::string wire_owner(const std::string& owner, std::uint64_t grant);
// wire_owner's inverse: "<owner>/<grant>" back into owner and grant.
bool split_wire_owner(std::string_view wire, std::string& owner, std::uint64_t& grant);

// One script invocation: which script, its keys and arguments.
struct ScriptCall {
  const Script* script;
  std::vector<std::string> keys;
  std::vector<std::string> args;
};

// `queued`: the line keeps the caller's place when busy (false: try once).
// `round`: Redlock's number of this round on the master (0: none), kept
// with the grant so that a late undo of a failed round (a release naming
// it) leaves a later round's grant alone.
// The plain layout (keys.hpp) has no line: a line's call never gets here
// (Capabilities::lines is false there).
// `member`: the caller's place among the name's waiters if it will wait
// ("<client id>:<attempt>", lua/wake_lib.lua); empty: it joins none.
ScriptCall acquire_request(const detail::Keyspace& ks, const detail::AcquireCall& call, bool queued,
                           std::uint64_t round = 0, std::string member = {});
// An exclusive hold lives in the lock hash whether a line's or not: the
// plain script releases both (and hands over to a line). Shared holds are
// the line's.
// `round`: only while the hold is still that Redlock round's (0: any).
ScriptCall release_request(const detail::Keyspace& ks, const detail::ReleaseCall& call, std::uint64_t round = 0);
ScriptCall abandon_request(const detail::Keyspace& ks, const detail::AbandonCall& call);
// A plain waiter `member` leaves the name's waiters (lua/leave.lua).
ScriptCall leave_request(const detail::Keyspace& ks, const std::string& name, std::string member);
// The waiter member of `client` (RedisBackend's id) for `attempt`, and the
// channel a release wakes that client's waiters of the lock on.
std::string waiter_member(const std::string& client, std::uint64_t attempt);
std::string waiter_channel(const detail::LockKeys& keys, const std::string& client);

Result<detail::AcquireOutcome> parse_acquire(const Reply& r, const detail::AcquireCall& call);
Result<detail::ReleaseOutcome> parse_release(const Reply& r);
// r[i] as an integer; false if r is no array or r[i] no integer.
bool int_at(const Reply& r, std::size_t i, long long& out);

// EVALSHA's command text (EVAL's with the body instead of the hash).
std::string eval_payload(std::string_view verb, std::string_view body_or_sha, const std::vector<std::string>& keys,
                         const std::vector<std::string>& args);
// The EVAL request of an EVALSHA one: the same numkeys, keys and arguments
// (its tail, after the hash) behind EVAL and the script's body.
std::string as_eval(const std::string& evalsha, const Script& script);

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_SCRIPT_CALLS_HPP_

#include "redis/script_calls.hpp"

#include <chrono>

#include "redis/errors.hpp"
#include "redis/keys.hpp"
#include "redis/line_scripts.hpp"

namespace dlock::redis {
namespace {

// A line's call (core/lock_line.hpp): fair or shared.
bool is_line(const detail::AcquireCall& call) { return call.queued || call.mode == detail::LockMode::shared; }

// When a plain grant was made, for inspect's "held for": display only, never
// a lease (those run on steady_clock).
std::string wall_ms_now() {
  using namespace std::chrono;
  return std::to_string(duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
}

std::string permits_text(long long p) { return p == 0 ? std::string("no limit (a read lock)") : std::to_string(p); }

}  // namespace

std::string wire_owner(const std::string& owner, std::uint64_t grant) {
  if (grant == 0) return owner;
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve(owner.size() + 12);
  out += owner;
  out += '/';
  do {
    out += kAlphabet[grant & 63];
    grant >>= 6;
  } while (grant != 0);
  return out;
}

bool split_wire_owner(std::string_view wire, std::string& owner, std::uint64_t& grant) {
  const auto slash = wire.rfind('/');
  if (slash == std::string_view::npos) return false;
  std::uint64_t g = 0;
  unsigned shift = 0;
  for (char c : wire.substr(slash + 1)) {
    unsigned v;
    if (c >= 'A' && c <= 'Z')
      v = static_cast<unsigned>(c - 'A');
    else if (c >= 'a' && c <= 'z')
      v = static_cast<unsigned>(c - 'a') + 26;
    else if (c >= '0' && c <= '9')
      v = static_cast<unsigned>(c - '0') + 52;
    else if (c == '-')
      v = 62;
    else if (c == '_')
      v = 63;
    else
      return false;
    if (shift >= 64) return false;
    g |= static_cast<std::uint64_t>(v) << shift;
    shift += 6;
  }
  if (shift == 0) return false;
  owner.assign(wire.substr(0, slash));
  grant = g;
  return true;
}

bool int_at(const Reply& r, std::size_t i, long long& out) {
  if (r.type != Reply::Type::array || r.elements.size() <= i || r.elements[i].type != Reply::Type::integer)
    return false;
  out = r.elements[i].integer;
  return true;
}

std::string waiter_member(const std::string& client, std::uint64_t attempt) {
  return client + ':' + std::to_string(attempt);
}

std::string waiter_channel(const detail::LockKeys& keys, const std::string& client) {
  return keys.channel + ':' + client;
}

ScriptCall leave_request(const detail::Keyspace& ks, const std::string& name, std::string member) {
  auto keys = ks.keys(name);
  return {&leave_script(), {std::move(keys.lock)}, {std::move(member), std::move(keys.channel)}};
}

ScriptCall acquire_request(const detail::Keyspace& ks, const detail::AcquireCall& call, bool queued,
                           std::uint64_t round, std::string member) {
  auto keys = ks.keys(call.name);
  std::string owner = wire_owner(call.owner, call.grant);
  std::string tomb = keys.tombstone + owner;
  if (ks.single_key())
    return {ks.plain() ? &plain_acquire_script() : &redisson_acquire_script(),
            {std::move(keys.lock), std::move(keys.fence), std::move(tomb)},
            {std::move(owner), std::to_string(call.lease.count()), call.info, wall_ms_now()}};
  if (is_line(call)) {
    return {&line_acquire_script(),
            {std::move(keys.lock), std::move(keys.fence), std::move(tomb), std::move(keys.line)},
            {std::move(owner), std::to_string(call.lease.count()), std::to_string(call.held),
             call.mode == detail::LockMode::shared ? "s" : "x", std::to_string(call.permits), queued ? "1" : "0",
             call.info, std::move(keys.channel), std::move(member)}};
  }
  ScriptCall sc{&acquire_script(),
                {std::move(keys.lock), std::move(keys.fence), std::move(tomb), std::move(keys.line)},
                {std::move(owner), std::to_string(call.lease.count()), std::to_string(call.held), std::to_string(round),
                 std::move(keys.channel), call.info, wall_ms_now()}};
  if (!member.empty()) {
    sc.args.push_back(std::move(member));
    sc.args.push_back(call.waited ? "1" : "0");
  }
  return sc;
}

// An exclusive hold lives in the lock hash whether a line's or not: the
// plain script releases both (and hands over to a line). Shared holds are
// the line's.
ScriptCall release_request(const detail::Keyspace& ks, const detail::ReleaseCall& call, std::uint64_t round) {
  auto keys = ks.keys(call.name);
  std::string owner = wire_owner(call.owner, call.grant);
  std::string tomb = keys.tombstone + owner;
  if (ks.plain())
    return {&plain_release_script(),
            {std::move(keys.lock), std::move(tomb)},
            {std::move(owner), std::move(keys.channel), std::to_string(call.tombstone.count())}};
  if (ks.redisson())
    return {&redisson_release_script(),
            {std::move(keys.lock), std::move(tomb)},
            {std::move(owner), std::move(keys.channel), std::to_string(call.tombstone.count()),
             std::move(keys.peer_channel)}};
  if (call.mode == detail::LockMode::shared) {
    return {&line_release_script(),
            {std::move(keys.lock), std::move(tomb), std::move(keys.line), std::move(keys.fence)},
            {std::move(owner), std::to_string(call.held), std::move(keys.channel), call.all ? "1" : "0",
             std::to_string(call.tombstone.count())}};
  }
  return {&release_script(),
          {std::move(keys.lock), std::move(tomb), std::move(keys.line), std::move(keys.fence)},
          {std::move(owner), std::to_string(call.held), std::move(keys.channel), call.all ? "1" : "0",
           std::to_string(round), std::to_string(call.tombstone.count())}};
}

ScriptCall abandon_request(const detail::Keyspace& ks, const detail::AbandonCall& call) {
  auto keys = ks.keys(call.name);
  std::string owner = wire_owner(call.owner, call.grant);
  std::string tomb = keys.tombstone + owner;
  return {
      &line_abandon_script(),
      {std::move(keys.lock), std::move(tomb), std::move(keys.line), std::move(keys.fence)},
      {std::move(owner), std::to_string(call.held), std::move(keys.channel), std::to_string(call.tombstone.count())}};
}

Result<detail::AcquireOutcome> parse_acquire(const Reply& r, const detail::AcquireCall& call) {
  long long code = 0, a = 0, b = 0;
  if (!int_at(r, 0, code) || !int_at(r, 1, a) || !int_at(r, 2, b)) return unexpected_reply("the acquire script", r);
  detail::AcquireOutcome out;
  switch (code) {
    case 5:  // the line's wording (core/lock_line.cpp)
      return Status(Errc::invalid_argument, "permits disagree: the lock is used with " + permits_text(a) +
                                                " and this call asked for " + permits_text(call.permits));
    case 6:
      return Status(Errc::precondition_failed,
                    std::string("this owner holds the lock ") +
                        (a == 0 ? "shared and asked for it exclusively" : "exclusively and asked for it shared") +
                        ": a change of mode would wait for itself (release first)");
    case 1:
      out.kind = detail::AcquireOutcome::Kind::granted;
      out.fence = static_cast<std::uint64_t>(a);
      out.depth = static_cast<unsigned>(b);
      break;
    case 0:  // b: the holder's PTTL (-1: no expiry, -2: gone meanwhile)
      out.kind = detail::AcquireOutcome::Kind::busy;
      out.hint = a >= 0    ? detail::WaitHint::expiry(milliseconds(a))
                 : a == -1 ? detail::WaitHint::event()
                           : detail::WaitHint::retry(milliseconds(0));
      break;
    case 7:  // the plain layout: a peer's release publishes nothing (-1: no expiry)
      out.kind = detail::AcquireOutcome::Kind::busy;
      out.hint = detail::WaitHint::poll(milliseconds(a));
      break;
    case 2:
      out.kind = detail::AcquireOutcome::Kind::lost;
      break;
    default:
      out.kind = detail::AcquireOutcome::Kind::mismatch;
      out.depth = static_cast<unsigned>(a);
  }
  return out;
}

Result<detail::ReleaseOutcome> parse_release(const Reply& r) {
  long long code = 0, depth = 0;
  if (!int_at(r, 0, code) || !int_at(r, 1, depth)) return unexpected_reply("the release script", r);
  detail::ReleaseOutcome out;
  out.depth = static_cast<unsigned>(depth);
  switch (code) {
    case 0:
    case 1:
      out.kind = detail::ReleaseOutcome::Kind::released;
      break;
    case -1:
      out.kind = detail::ReleaseOutcome::Kind::not_held;
      break;
    case -2:
      out.kind = detail::ReleaseOutcome::Kind::not_owner;
      break;
    default:
      out.kind = detail::ReleaseOutcome::Kind::mismatch;
  }
  return out;
}

std::string eval_payload(std::string_view verb, std::string_view body_or_sha, const std::vector<std::string>& keys,
                         const std::vector<std::string>& args) {
  std::vector<std::string_view> argv;
  argv.reserve(3 + keys.size() + args.size());
  std::string numkeys = std::to_string(keys.size());
  argv.push_back(verb);
  argv.push_back(body_or_sha);
  argv.push_back(numkeys);
  for (const auto& k : keys) argv.push_back(k);
  for (const auto& a : args) argv.push_back(a);
  std::string payload;
  append_command(payload, argv);
  return payload;
}

std::string as_eval(const std::string& evalsha, const Script& script) {
  // "*N\r\n$7\r\nEVALSHA\r\n$40\r\n<hash>\r\n<tail>"
  const std::size_t count_end = evalsha.find("\r\n") + 2;
  const std::size_t hash_at = evalsha.find(script.sha1, count_end);
  std::string out = evalsha.substr(0, count_end);
  for (std::string_view bulk : {std::string_view("EVAL"), script.body}) {
    out += '$';
    out += std::to_string(bulk.size());
    out += "\r\n";
    out += bulk;
    out += "\r\n";
  }
  out.append(evalsha, hash_at + script.sha1.size() + 2, std::string::npos);
  return out;
}

}  // namespace dlock::redis

#include "redis/scripts.hpp"

#include <openssl/sha.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "redis/line_scripts.hpp"
#include "redis/lua.hpp"

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
    for (const Script* x :
         {&acquire_script(), &release_script(), &renew_script(), &leave_script(), &line_acquire_script(),
          &line_release_script(), &line_abandon_script(), &line_inspect_script(), &plain_acquire_script(),
          &plain_release_script(), &plain_inspect_script(), &redisson_acquire_script(), &redisson_release_script(),
          &redisson_inspect_script()})
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

// One Script per body, hashed once, on first use.
template <const std::string_view* Body>
const Script& cached() {
  static const Script s{*Body, script_sha1(*Body)};
  return s;
}

}  // namespace

const Script& acquire_script() { return cached<&lua::acquire>(); }
const Script& release_script() { return cached<&lua::release>(); }
const Script& renew_script() { return cached<&lua::renew>(); }
const Script& leave_script() { return cached<&lua::leave>(); }
const Script& line_acquire_script() { return cached<&lua::line_acquire>(); }
const Script& line_release_script() { return cached<&lua::line_release>(); }
const Script& line_abandon_script() { return cached<&lua::line_abandon>(); }
const Script& line_inspect_script() { return cached<&lua::line_inspect>(); }
const Script& plain_acquire_script() { return cached<&lua::plain_acquire>(); }
const Script& plain_release_script() { return cached<&lua::plain_release>(); }
const Script& plain_inspect_script() { return cached<&lua::plain_inspect>(); }
const Script& redisson_acquire_script() { return cached<&lua::redisson_acquire>(); }
const Script& redisson_release_script() { return cached<&lua::redisson_release>(); }
const Script& redisson_inspect_script() { return cached<&lua::redisson_inspect>(); }

}  // namespace dlock::redis

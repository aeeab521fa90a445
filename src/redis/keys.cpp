#include "redis/keys.hpp"

#include <array>

#include "redis/cluster_map.hpp"

namespace dlock::detail {

namespace {

void append_escaped(std::string& tag, std::string_view name) {
  for (char c : name) {
    switch (c) {
      case '{':
        tag += "%7B";
        break;
      case '}':
        tag += "%7D";
        break;
      case '%':
        tag += "%25";
        break;
      default:
        tag += c;
    }
  }
}

// Glob characters of SCAN MATCH taken literally.
std::string glob_literal(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

LockKeys lock_keys(std::string_view prefix, std::string_view name, FenceScope fences) {
  std::string tag;
  tag.reserve(name.size() + 2);
  tag += '{';
  append_escaped(tag, name);
  tag += '}';
  LockKeys keys;
  keys.lock.reserve(prefix.size() + tag.size());
  keys.lock.append(prefix).append(tag);
  if (fences == FenceScope::name) {
    keys.fence = keys.lock + ":f";
  } else {
    keys.fence.reserve(prefix.size() + 5);
    keys.fence.append(prefix).append("fence");
  }
  keys.channel = keys.lock + ":wake";
  keys.line = keys.lock + ":q";
  keys.tombstone = keys.lock + ":t:";
  return keys;
}

const std::string& slot_tag(int slot) {
  // Short names tried in order until every slot has one (about 170,000
  // CRC16s of a few bytes, once per process).
  static const std::array<std::string, 16384> tags = [] {
    std::array<std::string, 16384> t;
    static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    std::size_t left = t.size();
    for (unsigned n = 0; left > 0; ++n) {
      std::string s;
      unsigned v = n;
      do {
        s += kDigits[v % 62];
        v /= 62;
      } while (v != 0);
      std::string& found = t[static_cast<std::size_t>(redis::key_slot(s))];
      if (found.empty()) {
        found = std::move(s);
        --left;
      }
    }
    return t;
  }();
  return tags[static_cast<std::size_t>(slot) & 16383];
}

std::string side_prefix(std::string_view prefix) {
  if (prefix.find_first_of("{}") == std::string_view::npos) return std::string(prefix);
  std::string out;
  append_escaped(out, prefix);
  return out;
}

namespace {

// The single-key layouts' own keys, "<prefix>{<slot tag>}:<layout>:{name}",
// in the name's cluster slot whatever the name holds.
LockKeys single_key_layout(std::string_view prefix, std::string_view name, FenceScope fences, std::string_view layout) {
  LockKeys keys;
  keys.lock.assign(name);
  std::string side;
  side.reserve(prefix.size() + name.size() + 20);
  side.append(side_prefix(prefix))
      .append("{")
      .append(slot_tag(redis::key_slot(name)))
      .append("}:")
      .append(layout)
      .append(":{");
  append_escaped(side, name);
  side += '}';
  // Per name, the counter ends in "}:f" as lock_keys' does (fence.lua
  // raises those to the server's clock).
  keys.fence = fences == FenceScope::name ? side + ":f" : std::string(prefix) + "fence";
  keys.channel = side + ":wake";
  keys.tombstone = side + ":t:";
  return keys;
}

}  // namespace

LockKeys plain_keys(std::string_view prefix, std::string_view name, FenceScope fences) {
  return single_key_layout(prefix, name, fences, "plain");
}

LockKeys redisson_keys(std::string_view prefix, std::string_view name, FenceScope fences) {
  LockKeys keys = single_key_layout(prefix, name, fences, "redisson");
  // Redisson's RedissonObject.prefixName: braces added unless the name has
  // one, so the channel is in the name's slot (sharded pub/sub).
  const bool braced = name.find('{') != std::string_view::npos;
  keys.channel = std::string("redisson_lock__channel:") + (braced ? "" : "{") + std::string(name) + (braced ? "" : "}");
  // node-redisson's prefixName braces every name that does not start with one.
  if (braced && !name.starts_with('{')) keys.peer_channel = "redisson_lock__channel:{" + std::string(name) + "}";
  return keys;
}

std::string lock_key_pattern(std::string_view prefix, std::string_view name_prefix) {
  std::string tag = "{";
  append_escaped(tag, name_prefix);
  return glob_literal(prefix) + glob_literal(tag) + "*";
}

std::string plain_key_pattern(std::string_view name_prefix) { return glob_literal(name_prefix) + "*"; }

std::string name_of_key(std::string_view prefix, std::string_view key) {
  if (!key.starts_with(prefix) || key.size() < prefix.size() + 2 || key[prefix.size()] != '{') return {};
  const std::string_view rest = key.substr(prefix.size() + 1);
  const auto close = rest.find('}');  // braces inside a name are escaped
  // Not a lock: a per-name fence counter, or a plain layout's side key.
  if (close == std::string_view::npos || rest.substr(close + 1) == ":f" ||
      rest.substr(close + 1).starts_with(":plain:"))
    return {};
  std::string name;
  for (std::size_t i = 0; i < close; ++i) {
    if (rest[i] == '%' && i + 2 < close && hex_value(rest[i + 1]) >= 0 && hex_value(rest[i + 2]) >= 0) {
      name += static_cast<char>(hex_value(rest[i + 1]) * 16 + hex_value(rest[i + 2]));
      i += 2;
    } else {
      name += rest[i];
    }
  }
  return name;
}

bool own_key(std::string_view prefix, std::string_view key) {
  if (const std::string side = side_prefix(prefix); side != prefix && own_key(side, key)) return true;
  if (!key.starts_with(prefix)) return false;
  const std::string_view rest = key.substr(prefix.size());
  if (rest == "fence") return true;
  if (!rest.starts_with('{')) return false;
  const auto close = rest.find('}');
  if (close == std::string_view::npos) return false;
  const std::string_view tail = rest.substr(close + 1);
  return tail.empty() || tail == ":f" || tail == ":wake" || tail == ":q" || tail == ":w" || tail == ":r" ||
         tail.starts_with(":t:") || tail.starts_with(":plain:") || tail.starts_with(":redisson:");
}

}  // namespace dlock::detail

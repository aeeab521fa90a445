#include "redis/keys.hpp"

namespace dlock::detail {

LockKeys lock_keys(std::string_view prefix, std::string_view name) {
  std::string tag;
  tag.reserve(name.size() + 2);
  tag += '{';
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
  tag += '}';
  LockKeys keys;
  keys.lock.reserve(prefix.size() + tag.size());
  keys.lock.append(prefix).append(tag);
  keys.fence.reserve(prefix.size() + 5);
  keys.fence.append(prefix).append("fence");
  keys.channel = keys.lock + ":wake";
  keys.line = keys.lock + ":q";
  return keys;
}

}  // namespace dlock::detail

#include "core/keys.hpp"

namespace dlock::detail {

Status validate_name(std::string_view name) {
  if (name.empty()) return {Errc::invalid_argument, "lock name is empty"};
  if (name.size() > kMaxNameBytes)
    return {Errc::invalid_argument,
            "lock name is " + std::to_string(name.size()) + " bytes; the limit is " + std::to_string(kMaxNameBytes)};
  return {};
}

Status validate_owner(std::string_view owner) {
  if (owner.empty()) return {Errc::invalid_argument, "owner is empty"};
  if (owner.size() > kMaxOwnerBytes)
    return {Errc::invalid_argument,
            "owner is " + std::to_string(owner.size()) + " bytes; the limit is " + std::to_string(kMaxOwnerBytes)};
  return {};
}

LockKeys lock_keys(std::string_view prefix, std::string_view name) {
  std::string tag;
  tag.reserve(name.size() + 2);
  tag += '{';
  for (char c : name) {
    switch (c) {
      case '{': tag += "%7B"; break;
      case '}': tag += "%7D"; break;
      case '%': tag += "%25"; break;
      default: tag += c;
    }
  }
  tag += '}';
  LockKeys keys;
  keys.lock.reserve(prefix.size() + tag.size());
  keys.lock.append(prefix).append(tag);
  keys.fence.reserve(prefix.size() + 5);
  keys.fence.append(prefix).append("fence");
  keys.channel = keys.lock + ":wake";
  return keys;
}

}  // namespace dlock::detail

#include "core/names.hpp"

#include <string>

namespace dlock::detail {

Status validate_name(std::string_view name) {
  if (name.empty()) return {Errc::invalid_argument, "lock name is empty"};
  if (name.size() > kMaxNameBytes)
    return {Errc::invalid_argument,
            "lock name is " + std::to_string(name.size()) + " bytes; the limit is " + std::to_string(kMaxNameBytes)};
  if (name.find('\0') != std::string_view::npos)
    return {Errc::invalid_argument, "lock name contains a NUL byte (C strings and libpq would cut it short)"};
  return {};
}

Status validate_owner(std::string_view owner) {
  if (owner.empty()) return {Errc::invalid_argument, "owner is empty"};
  if (owner.size() > kMaxOwnerBytes)
    return {Errc::invalid_argument,
            "owner is " + std::to_string(owner.size()) + " bytes; the limit is " + std::to_string(kMaxOwnerBytes)};
  if (owner.find('\0') != std::string_view::npos) return {Errc::invalid_argument, "owner contains a NUL byte"};
  return {};
}

}  // namespace dlock::detail

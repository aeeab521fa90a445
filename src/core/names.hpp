// Lock names and owners: what every backend accepts.
#ifndef DLOCK_CORE_NAMES_HPP_
#define DLOCK_CORE_NAMES_HPP_

#include <cstddef>
#include <string_view>

#include "dlock/error.hpp"

namespace dlock::detail {

inline constexpr std::size_t kMaxNameBytes = 512;
inline constexpr std::size_t kMaxOwnerBytes = 128;

// ok, or invalid_argument saying what is wrong with the name.
Status validate_name(std::string_view name);
Status validate_owner(std::string_view owner);

}  // namespace dlock::detail

#endif  // DLOCK_CORE_NAMES_HPP_

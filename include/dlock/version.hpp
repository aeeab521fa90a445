// dlock/version.hpp: the library version (the one source of truth; CMake reads it).
#ifndef DLOCK_VERSION_HPP_
#define DLOCK_VERSION_HPP_

#define DLOCK_VERSION_MAJOR 0
#define DLOCK_VERSION_MINOR 2
#define DLOCK_VERSION_PATCH 0
#define DLOCK_VERSION_STRING "0.2.0"

#include <string_view>

#include "dlock/export.hpp"

namespace dlock {

// The version of the library linked in (DLOCK_VERSION_STRING when it was
// built), which a program can compare with the headers it was built with.
DLOCK_EXPORT std::string_view version() noexcept;

}  // namespace dlock

#endif  // DLOCK_VERSION_HPP_

// The line that follows an error: what to do about it, in the terms of the
// store the URL names (an ACL user is a Redis thing; a role, PostgreSQL's;
// a file, SQLite's).
#ifndef DLOCK_TOOLS_DLOCK_HINTS_HPP_
#define DLOCK_TOOLS_DLOCK_HINTS_HPP_

#include <dlock/error.hpp>
#include <string>
#include <string_view>

namespace dlock::cli {

enum class Store { redis, postgres, sqlite, zookeeper, etcd, unknown };

// The store a URL names, by its scheme.
Store store_of(std::string_view url);

// One line saying what to do about `status`, for a client of `url`.
std::string advice(const Status& status, std::string_view url);

}  // namespace dlock::cli

#endif  // DLOCK_TOOLS_DLOCK_HINTS_HPP_

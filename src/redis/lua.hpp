// The Lua scripts, one file each in src/redis/lua/ (embedded at build time
// by cmake/dlockEmbedText.cmake, their `--@include` lines expanded). Each
// is a whole script as sent to the server; scripts.hpp and line_scripts.hpp
// say what each takes and returns.
#ifndef DLOCK_REDIS_LUA_HPP_
#define DLOCK_REDIS_LUA_HPP_

#include <string_view>

namespace dlock::redis::lua {

extern const std::string_view acquire, release, renew, leave;
extern const std::string_view line_acquire, line_release, line_abandon, line_inspect;
extern const std::string_view plain_acquire, plain_release, plain_inspect;
extern const std::string_view redisson_acquire, redisson_release, redisson_inspect;

}  // namespace dlock::redis::lua

#endif  // DLOCK_REDIS_LUA_HPP_

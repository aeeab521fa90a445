// The one place where Redis error replies and transport errors become Errc.
#ifndef DLOCK_REDIS_ERRORS_HPP_
#define DLOCK_REDIS_ERRORS_HPP_

#include <string_view>

#include "dlock/error.hpp"
#include "redis/resp.hpp"

namespace dlock::redis {

// An error reply ("WRONGTYPE ...", "NOAUTH ...", "ERR Error running script
// ... WRONGTYPE ...") as a Status. Errors raised inside Lua scripts are
// matched by the inner code.
Status translate_error(std::string_view message);

// A reply that is not of the expected shape.
Status unexpected_reply(std::string_view what, const Reply& reply);

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_ERRORS_HPP_

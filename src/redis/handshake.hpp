// What every Redis connection sends first, the I/O thread's and the fast
// path's alike: AUTH when credentials are given, SELECT for a database other
// than 0, then a PING, so a server that requires a password fails the
// handshake (NOAUTH) rather than the first lock call. AUTH, SELECT and PING
// change nothing: a handshake cut short leaves nothing in doubt.
#ifndef DLOCK_REDIS_HANDSHAKE_HPP_
#define DLOCK_REDIS_HANDSHAKE_HPP_

#include <cstddef>
#include <string>
#include <vector>

#include "dlock/error.hpp"
#include "redis/resp.hpp"
#include "redis/url.hpp"

namespace dlock::redis {

// Appends the handshake's commands to `payload`; returns how many replies
// they get.
std::size_t append_handshake(std::string& payload, const detail::RedisEndpoint& endpoint);

// The handshake's verdict from its replies: the first error, translated (a
// database the server does not have is invalid_argument).
Status handshake_verdict(const std::vector<Reply>& replies, const detail::RedisEndpoint& endpoint);

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_HANDSHAKE_HPP_

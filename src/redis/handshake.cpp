#include "redis/handshake.hpp"

#include "redis/errors.hpp"

namespace dlock::redis {

std::size_t append_handshake(std::string& payload, const detail::RedisEndpoint& ep) {
  std::size_t n = 0;
  if (!ep.password.empty()) {
    if (ep.username.empty())
      append_command(payload, {"AUTH", ep.password});
    else
      append_command(payload, {"AUTH", ep.username, ep.password});
    ++n;
  }
  if (ep.db != 0) {
    const std::string db = std::to_string(ep.db);
    append_command(payload, {"SELECT", db});
    ++n;
  }
  append_command(payload, {"PING"});
  return n + 1;
}

Status handshake_verdict(const std::vector<Reply>& replies, const detail::RedisEndpoint& ep) {
  for (const Reply& r : replies) {
    if (!r.is_error()) continue;
    Status s = translate_error(r.str);
    if (s.code() == Errc::server_error && r.str.find("DB index") != std::string::npos)
      s = Status(Errc::invalid_argument, "database " + std::to_string(ep.db) + ": " + r.str);
    return s;
  }
  return {};
}

}  // namespace dlock::redis

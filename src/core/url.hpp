// Parsing of redis:// and rediss:// URLs.
#ifndef DLOCK_CORE_URL_HPP_
#define DLOCK_CORE_URL_HPP_

#include <cstdint>
#include <string>
#include <string_view>

#include "dlock/error.hpp"

namespace dlock::detail {

struct RedisEndpoint {
  bool tls = false;
  std::string host;        // name, IPv4, or IPv6 without brackets
  std::uint16_t port = 6379;
  std::string username;    // empty: the default user
  std::string password;    // empty: no AUTH
  int db = 0;
  std::string ca_file;     // rediss only; empty: the system trust store
  std::string cert_file;   // rediss only; client certificate (with key_file)
  std::string key_file;

  // "rediss://host:port/db" with credentials left out: safe to log.
  std::string describe() const;
};

// invalid_argument with a message naming the problem (never the password).
Result<RedisEndpoint> parse_redis_url(std::string_view url);

}  // namespace dlock::detail

#endif  // DLOCK_CORE_URL_HPP_

#include "redis/errors.hpp"

#include <string>

namespace dlock::redis {
namespace {
bool has(std::string_view message, std::string_view code) {
  // Error codes stand at the start, or inside Lua error text after a space
  // or a '-', followed by a space or the end.
  for (auto pos = message.find(code); pos != std::string_view::npos; pos = message.find(code, pos + 1)) {
    const bool starts = pos == 0 || message[pos - 1] == ' ' || message[pos - 1] == '-';
    const auto end = pos + code.size();
    if (starts && (end == message.size() || message[end] == ' ')) return true;
  }
  return false;
}
}  // namespace

Status translate_error(std::string_view message) {
  std::string text(message.substr(0, 300));
  if (has(message, "WRONGTYPE"))
    return {Errc::wrong_type, "a lock key holds another Redis type: " + text};
  if (has(message, "WRONGPASS") || has(message, "NOAUTH") ||
      (message.starts_with("ERR") && message.find("AUTH") != std::string_view::npos &&
       message.find("password") != std::string_view::npos))
    return {Errc::auth_failed, text};
  if (has(message, "NOPERM")) return {Errc::permission_denied, text};
  // maxmemory reached with noeviction: nothing was written; it may pass.
  if (has(message, "OOM"))
    return {Errc::unavailable, "the server is out of memory (maxmemory); nothing was written: " + text};
  if (has(message, "LOADING") || has(message, "BUSY") || has(message, "MASTERDOWN") || has(message, "TRYAGAIN") ||
      has(message, "READONLY") || has(message, "CLUSTERDOWN"))
    return {Errc::unavailable, "server cannot serve the request now: " + text};
  return {Errc::server_error, text};
}

Status unexpected_reply(std::string_view what, const Reply& reply) {
  if (reply.is_error()) return translate_error(reply.str);
  return {Errc::protocol_error, "unexpected reply to " + std::string(what)};
}

}  // namespace dlock::redis

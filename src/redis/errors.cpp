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

// The error reply's own code: the first of the known ones it carries (a
// script's error wraps it in "ERR Error running script..."), else its first
// word.
std::string backend_code(std::string_view message) {
  for (std::string_view code : {"WRONGTYPE", "WRONGPASS", "NOAUTH", "NOPERM", "OOM", "LOADING", "BUSY", "MASTERDOWN",
                                "TRYAGAIN", "READONLY", "CLUSTERDOWN", "NOSCRIPT", "MOVED", "ASK", "CROSSSLOT"})
    if (has(message, code)) return std::string(code);
  return std::string(message.substr(0, message.find(' ')));
}

Status translate_error(std::string_view message) {
  std::string text(message.substr(0, 300));
  std::string code = backend_code(message);
  if (code == "WRONGTYPE") return {Errc::wrong_type, "a lock key holds another Redis type: " + text, code};
  if (code == "WRONGPASS" || code == "NOAUTH" ||
      (message.starts_with("ERR") && message.find("AUTH") != std::string_view::npos &&
       message.find("password") != std::string_view::npos))
    return {Errc::auth_failed, text, code};
  if (code == "NOPERM") return {Errc::permission_denied, text, code};
  // maxmemory reached with noeviction: nothing was written; it may pass.
  if (code == "OOM")
    return {Errc::unavailable, "the server is out of memory (maxmemory); nothing was written: " + text, code};
  if (code == "LOADING" || code == "BUSY" || code == "MASTERDOWN" || code == "TRYAGAIN" || code == "READONLY" ||
      code == "CLUSTERDOWN")
    return {Errc::unavailable, "server cannot serve the request now: " + text, code};
  // A redirect or a cross-slot script reaching the backend: a redis:// URL
  // names a cluster node (one server's fence counter is outside the lock's
  // slot). Retrying would not help; nothing ran.
  if (code == "CROSSSLOT")
    return {Errc::server_error,
            "one call's keys are in different cluster slots (a redis:// URL naming a cluster node: use "
            "redis-cluster://): " +
                text,
            code};
  if (code == "MOVED" || code == "ASK")
    return {Errc::server_error, "the server is a cluster node (use redis-cluster:// for a cluster): " + text, code};
  return {Errc::server_error, text, code};
}

Status unexpected_reply(std::string_view what, const Reply& reply) {
  if (reply.is_error()) return translate_error(reply.str);
  return {Errc::protocol_error, "unexpected reply to " + std::string(what)};
}

}  // namespace dlock::redis

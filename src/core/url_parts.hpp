// Pieces every backend's URL parser uses: percent-decoding, query
// parameters, whole numbers.
#ifndef DLOCK_CORE_URL_PARTS_HPP_
#define DLOCK_CORE_URL_PARTS_HPP_

#include <charconv>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail {

// false on a malformed escape ("%4", "%zz").
bool percent_decode(std::string_view in, std::string& out);
// Every byte but RFC 3986's unreserved ones (A-Z a-z 0-9 - . _ ~) as %XX:
// safe in a query value or a path segment.
std::string percent_encode(std::string_view in);

// Cuts the next "key[=value]" off a query string ("a=1&b=2").
std::string_view next_param(std::string_view& query);

// A parameter next_param cut, split at '=', its value percent-decoded.
// valued: the value is there, not empty, and its escapes are good.
struct Param {
  std::string key;
  std::string value;
  bool valued = false;
};
Param split_param(std::string_view kv);

template <class Int>
bool parse_int(std::string_view s, Int& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// "10s", "1500ms", "2m", "1h": a unit is required (clients disagree on the
// default); at most an hour.
bool parse_duration(std::string_view s, std::chrono::milliseconds& out);

// "host[:port],[v6]:port,...": each as "host:port" (`default_port` where
// none is given). Empty on success, else what is wrong.
std::string parse_host_list(std::string_view list, int default_port, std::vector<std::string>& out);

}  // namespace dlock::detail

#endif  // DLOCK_CORE_URL_PARTS_HPP_

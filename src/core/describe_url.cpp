// describe_url(): any scheme's URL with its secret left out, for logs.
#include <string>
#include <string_view>

#include "dlock/client.hpp"

namespace dlock {

std::string describe_url(std::string_view url) {
  const auto scheme = url.find("://");
  if (scheme == std::string_view::npos) return std::string(url);
  const auto start = scheme + 3;
  // The authority ends at the path or the query; its userinfo at the last '@'.
  auto end = url.find_first_of("/?#", start);
  if (end == std::string_view::npos) end = url.size();
  const auto at = url.substr(start, end - start).rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  const std::string_view userinfo = url.substr(start, at);
  const auto colon = userinfo.find(':');
  std::string out(url.substr(0, start));
  if (colon != std::string_view::npos)
    out += std::string(userinfo.substr(0, colon)) + ":***";
  else
    out += "***";  // redis://PASSWORD@host: the lone part is the password
  out += url.substr(start + at);
  return out;
}

}  // namespace dlock

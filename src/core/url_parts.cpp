#include "core/url_parts.hpp"

namespace dlock::detail {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

std::string percent_encode(std::string_view in) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : in) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string_view next_param(std::string_view& query) {
  const auto amp = query.find('&');
  const std::string_view kv = query.substr(0, amp);
  query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
  return kv;
}

Param split_param(std::string_view kv) {
  Param p;
  const auto eq = kv.find('=');
  p.key = std::string(kv.substr(0, eq));
  p.valued = eq != std::string_view::npos && percent_decode(kv.substr(eq + 1), p.value) && !p.value.empty();
  return p;
}

bool parse_duration(std::string_view s, std::chrono::milliseconds& out) {
  long long n = 0;
  std::size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  if (digits == 0 || !parse_int(s.substr(0, digits), n)) return false;
  const std::string_view unit = s.substr(digits);
  const long long scale = unit == "ms" ? 1 : unit == "s" ? 1000 : unit == "m" ? 60000 : unit == "h" ? 3600000 : 0;
  if (scale == 0 || n > 3'600'000 / scale) return false;
  out = std::chrono::milliseconds(n * scale);
  return true;
}

std::string parse_host_list(std::string_view list, int default_port, std::vector<std::string>& out) {
  if (list.empty()) return "missing host";
  while (!list.empty()) {
    const auto comma = list.find(',');
    std::string_view hostport = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    std::string_view host = hostport, port;
    if (hostport.starts_with('[')) {
      const auto close = hostport.find(']');
      if (close == std::string_view::npos) return "unclosed '[' in a host";
      host = hostport.substr(0, close + 1);
      const std::string_view rest = hostport.substr(close + 1);
      if (!rest.empty() && rest.front() != ':') return "expected ':PORT' after ']'";
      if (!rest.empty()) port = rest.substr(1);
    } else if (const auto colon = hostport.rfind(':'); colon != std::string_view::npos) {
      host = hostport.substr(0, colon);
      port = hostport.substr(colon + 1);
    }
    if (host.empty() || host == "[]") return "empty host in '" + std::string(hostport) + "'";
    int p = default_port;
    if (!port.empty() && (!parse_int(port, p) || p < 1 || p > 65535))
      return "port must be 1-65535 in '" + std::string(hostport) + "'";
    out.push_back(std::string(host) + ":" + std::to_string(p));
  }
  return {};
}

}  // namespace dlock::detail

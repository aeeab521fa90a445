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

}  // namespace dlock::detail

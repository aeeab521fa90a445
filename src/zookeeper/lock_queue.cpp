#include "zookeeper/lock_queue.hpp"

#include <algorithm>

#include "core/url_parts.hpp"

namespace dlock::zookeeper {
namespace {

constexpr std::size_t kSeqDigits = 10;

bool kept(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == ':' || c == '.';
}

}  // namespace

std::string encode_name(std::string_view name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const bool dots = name == "." || name == "..";
  std::string out;
  for (char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (kept(ch) && !dots) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string decode_name(std::string_view segment) {
  std::string out;
  if (!detail::percent_decode(segment, out)) return std::string(segment);
  return out;
}

std::string child_prefix(std::string_view guid) { return "_c_" + std::string(guid) + "-lock-"; }

std::optional<std::int64_t> sequence_of(std::string_view child) {
  if (child.size() < kSeqDigits) return std::nullopt;
  std::int64_t seq = 0;
  if (!detail::parse_int(child.substr(child.size() - kSeqDigits), seq) || seq < 0) return std::nullopt;
  return seq;
}

std::vector<std::string> in_order(std::vector<std::string> children) {
  std::vector<std::pair<std::int64_t, std::string>> keyed;
  keyed.reserve(children.size());
  for (auto& c : children)
    if (auto seq = sequence_of(c)) keyed.emplace_back(*seq, std::move(c));
  std::sort(keyed.begin(), keyed.end());
  std::vector<std::string> out;
  out.reserve(keyed.size());
  for (auto& [seq, c] : keyed) out.push_back(std::move(c));
  return out;
}

Place place_of(const std::vector<std::string>& ordered, std::string_view mine) {
  Place p;
  const auto it = std::find(ordered.begin(), ordered.end(), mine);
  if (it == ordered.end()) return p;
  p.present = true;
  p.ahead = static_cast<std::size_t>(it - ordered.begin());
  p.first = p.ahead == 0;
  if (!p.first) p.predecessor = *(it - 1);
  return p;
}

std::optional<std::string> find_by_guid(const std::vector<std::string>& children, std::string_view guid) {
  const std::string prefix = child_prefix(guid);
  for (const auto& c : children)
    if (c.starts_with(prefix) && sequence_of(c)) return c;
  return std::nullopt;
}

}  // namespace dlock::zookeeper

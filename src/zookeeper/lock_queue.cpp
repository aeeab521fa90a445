#include "zookeeper/lock_queue.hpp"

#include <algorithm>

#include "core/url_parts.hpp"

namespace dlock::zookeeper {
namespace {

constexpr std::size_t kSeqDigits = 10;
constexpr std::string_view kKazooLock = "__lock__";
constexpr std::string_view kKazooRead = "__rlock__";

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

std::string child_prefix(std::string_view guid, detail::LockMode mode, unsigned permits, Naming naming) {
  if (naming == Naming::kazoo)
    return "_c_" + std::string(guid) + std::string(mode == detail::LockMode::exclusive ? kKazooLock : kKazooRead);
  return "_c_" + std::string(guid) + "-" + detail::kind_word(mode, permits) + "-";
}

Status kazoo_refusal(detail::LockMode mode, unsigned permits) {
  if (mode == detail::LockMode::exclusive || permits == 0) return {};
  return {Errc::invalid_argument,
          "layout=kazoo does not offer counted locks: kazoo's Semaphore keeps a lease node per holder, not a "
          "queue its Lock shares (use the default layout for a Semaphore)"};
}

std::string node_data(Naming naming, std::string_view owner, std::string_view info) {
  if (naming == Naming::kazoo) return std::string(info);
  return detail::node_data(owner, info);
}

std::string holder_of(std::string_view child, std::string_view data) {
  const auto printable = [](std::string_view s) {
    std::string out(s);
    for (char& c : out)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    return out;
  };
  const std::string_view head = child.substr(0, child.size() >= kSeqDigits ? child.size() - kSeqDigits : 0);
  const bool kazoo_named = head.ends_with(kKazooLock) || head.ends_with(kKazooRead);
  if (child.starts_with("_c_")) return kazoo_named ? printable(data) : parse_node_data(data).info;
  const std::string shown = printable(data.substr(0, 64));
  std::string out = "a peer library (node " + std::string(child);
  if (!shown.empty()) out += ", identifier '" + shown + (data.size() > 64 ? "...'" : "'");
  return out + ")";
}

std::optional<QueueNode> parse_child(std::string_view child) {
  const auto seq = sequence_of(child);
  if (!seq) return std::nullopt;
  QueueNode n;
  n.name = std::string(child);
  n.seq = *seq;
  const std::string_view head = child.substr(0, child.size() - kSeqDigits);
  if (head.ends_with(kKazooRead)) {
    n.mode = detail::LockMode::shared;
    return n;
  }
  if (head.empty() || head.back() != '-') return n;  // kazoo's "__lock__" among them
  const std::string_view rest = head.substr(0, head.size() - 1);
  const auto dash = rest.rfind('-');
  detail::read_kind_word(dash == std::string_view::npos ? rest : rest.substr(dash + 1), n);
  return n;
}

std::vector<QueueNode> line_of(const std::vector<std::string>& children) {
  std::vector<QueueNode> out;
  out.reserve(children.size());
  for (const auto& c : children)
    if (auto n = parse_child(c)) out.push_back(std::move(*n));
  std::sort(out.begin(), out.end(), [](const QueueNode& a, const QueueNode& b) { return a.seq < b.seq; });
  return out;
}

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

std::vector<std::string> nodes_of_guid(const std::vector<std::string>& children, std::string_view guid) {
  // "_c_<guid>-<kind>-<seq>": the kind holds no '-', so a longer guid that
  // starts with this one (base64url has '-') is not taken for it. Or
  // kazoo's "_c_<guid>__lock__<seq>" and "__rlock__": nothing else may
  // stand between the guid and the sequence.
  const std::string prefix = "_c_" + std::string(guid);
  std::vector<std::string> out;
  for (const auto& c : children) {
    if (!c.starts_with(prefix) || !sequence_of(c) || c.size() < prefix.size() + kSeqDigits + 2) continue;
    const std::string_view kind = std::string_view(c).substr(prefix.size(), c.size() - prefix.size() - kSeqDigits);
    const bool curator = kind.size() >= 3 && kind.front() == '-' && kind.back() == '-' &&
                         kind.substr(1, kind.size() - 2).find('-') == std::string_view::npos;
    if (curator || kind == kKazooLock || kind == kKazooRead) out.push_back(c);
  }
  return out;
}

std::optional<std::string> find_by_guid(const std::vector<std::string>& children, std::string_view guid) {
  auto all = nodes_of_guid(children, guid);
  if (all.empty()) return std::nullopt;
  return all.front();
}

}  // namespace dlock::zookeeper

#include "redis/cluster_map.hpp"

#include <charconv>

namespace dlock::redis {

std::uint16_t crc16_xmodem(std::string_view data) {
  std::uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc ^= static_cast<std::uint16_t>(byte << 8);
    for (int i = 0; i < 8; ++i) crc = static_cast<std::uint16_t>((crc & 0x8000) ? ((crc << 1) ^ 0x1021) : (crc << 1));
  }
  return crc;
}

int key_slot(std::string_view key) {
  if (auto open = key.find('{'); open != std::string_view::npos) {
    auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return crc16_xmodem(key) & (kClusterSlots - 1);
}

std::string ClusterNode::address() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

const ClusterNode* SlotMap::master_of(int slot) const {
  if (slot < 0 || slot >= kClusterSlots || owner_[slot] == kNone) return nullptr;
  return &masters_[owner_[slot]];
}

int SlotMap::index_of(const ClusterNode& node) {
  for (std::size_t i = 0; i < masters_.size(); ++i)
    if (masters_[i].host == node.host && masters_[i].port == node.port) return static_cast<int>(i);
  masters_.push_back(node);
  return static_cast<int>(masters_.size() - 1);
}

void SlotMap::move(int slot, const ClusterNode& node) {
  if (slot < 0 || slot >= kClusterSlots) return;
  owner_[slot] = static_cast<std::uint16_t>(index_of(node));
}

std::vector<ClusterNode> SlotMap::masters() const {
  std::vector<bool> serving(masters_.size(), false);
  for (auto o : owner_)
    if (o != kNone) serving[o] = true;
  std::vector<ClusterNode> out;
  for (std::size_t i = 0; i < masters_.size(); ++i)
    if (serving[i]) out.push_back(masters_[i]);
  return out;
}

int SlotMap::unserved() const {
  int n = 0;
  for (auto o : owner_) n += o == kNone;
  return n;
}

// Each element: [start, end, [host, port, id, ...] (the master), replicas...].
Result<SlotMap> SlotMap::from_cluster_slots(const Reply& reply, std::string_view seed_host) {
  auto bad = [](std::string why) { return Status(Errc::protocol_error, "unexpected CLUSTER SLOTS reply: " + why); };
  if (reply.is_error()) return Status(Errc::server_error, reply.str);
  if (reply.type != Reply::Type::array) return bad("not an array");
  SlotMap map;
  for (const Reply& range : reply.elements) {
    if (range.type != Reply::Type::array || range.elements.size() < 3) return bad("a range without a master");
    const Reply& lo = range.elements[0];
    const Reply& hi = range.elements[1];
    const Reply& master = range.elements[2];
    if (lo.type != Reply::Type::integer || hi.type != Reply::Type::integer || lo.integer < 0 ||
        hi.integer >= kClusterSlots || lo.integer > hi.integer)
      return bad("a slot range out of bounds");
    if (master.type != Reply::Type::array || master.elements.size() < 2 ||
        master.elements[1].type != Reply::Type::integer || master.elements[1].integer <= 0 ||
        master.elements[1].integer > 65535)
      return bad("a master without host and port");
    ClusterNode node;
    node.host = master.elements[0].str;
    if (node.host.empty() || node.host == "?") node.host = std::string(seed_host);
    node.port = static_cast<std::uint16_t>(master.elements[1].integer);
    const auto index = static_cast<std::uint16_t>(map.index_of(node));
    for (long long s = lo.integer; s <= hi.integer; ++s) map.owner_[static_cast<std::size_t>(s)] = index;
  }
  if (map.masters_.empty()) return Status(Errc::unavailable, "the cluster serves no slot yet (CLUSTER SLOTS is empty)");
  return map;
}

Redirect parse_redirect(std::string_view error) {
  Redirect r;
  auto word = [&](std::string_view w) {
    return error.starts_with(w) && (error.size() == w.size() || error[w.size()] == ' ');
  };
  if (word("TRYAGAIN")) {
    r.kind = Redirect::Kind::tryagain;
    return r;
  }
  if (word("CLUSTERDOWN")) {
    r.kind = Redirect::Kind::clusterdown;
    return r;
  }
  Redirect::Kind kind;
  if (word("MOVED"))
    kind = Redirect::Kind::moved;
  else if (word("ASK"))
    kind = Redirect::Kind::ask;
  else
    return r;
  std::string_view rest = error.substr(error.find(' ') + 1);
  const auto space = rest.find(' ');
  if (space == std::string_view::npos) return r;
  std::string_view slot = rest.substr(0, space), target = rest.substr(space + 1);
  const auto colon = target.rfind(':');
  if (colon == std::string_view::npos) return r;
  int s = -1;
  unsigned port = 0;
  std::string_view port_text = target.substr(colon + 1);
  if (std::from_chars(slot.data(), slot.data() + slot.size(), s).ec != std::errc() || s < 0 || s >= kClusterSlots)
    return r;
  if (std::from_chars(port_text.data(), port_text.data() + port_text.size(), port).ec != std::errc() || port == 0 ||
      port > 65535)
    return r;
  std::string_view host = target.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  r.kind = kind;
  r.slot = s;
  r.node.host = std::string(host);
  r.node.port = static_cast<std::uint16_t>(port);
  return r;
}

}  // namespace dlock::redis

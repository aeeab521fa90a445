// The limit's own routing for the minimal hiredis loops: one blocking
// connection per master, each key sent to its slot's master. For redis://
// that is the one server; for redis-cluster:// the slot map is read once
// from the first seed (CLUSTER SLOTS) and kept: the benchmark moves no slot,
// so the limit needs no redirects. Nothing here is dlock's code: the limit
// is what any minimal cluster client does.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::bench {

// Redis Cluster's key slot: CRC16-CCITT (XMODEM) of the hash tag if the key
// has a non-empty {...}, else of the whole key, modulo 16384.
inline int limit_key_slot(std::string_view key) {
  if (auto open = key.find('{'); open != std::string_view::npos) {
    if (auto close = key.find('}', open + 1); close != std::string_view::npos && close > open + 1)
      key = key.substr(open + 1, close - open - 1);
  }
  std::uint16_t crc = 0;
  for (unsigned char ch : key) {
    crc ^= static_cast<std::uint16_t>(ch << 8);
    for (int b = 0; b < 8; ++b) crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021) : crc << 1;
  }
  return crc & 16383;
}

class LimitRoutes {
 public:
  // url: redis://host:port[...] or redis-cluster://host:port[,host:port...][...]
  explicit LimitRoutes(const std::string& url) {
    const bool cluster = url.rfind("redis-cluster://", 0) == 0;
    const auto start = url.find("://") + 3;
    std::string seed = url.substr(start, url.find_first_of(",/?", start) - start);
    if (auto at = seed.rfind('@'); at != std::string::npos) seed = seed.substr(at + 1);
    const auto colon = seed.rfind(':');
    const std::string host = seed.substr(0, colon);
    const int port = std::stoi(seed.substr(colon + 1));
    redisContext* first = open(host, port);
    if (!cluster) {
      slot_node_.assign(16384, 0);
      return;
    }
    slot_node_.assign(16384, -1);
    std::unique_ptr<redisReply, decltype(&freeReplyObject)> slots(
        static_cast<redisReply*>(redisCommand(first, "CLUSTER SLOTS")), freeReplyObject);
    if (!slots || slots->type != REDIS_REPLY_ARRAY) throw std::runtime_error("CLUSTER SLOTS failed for the limit");
    for (std::size_t i = 0; i < slots->elements; ++i) {
      const redisReply* range = slots->element[i];
      if (range->elements < 3) continue;
      const redisReply* master = range->element[2];
      std::string h(master->element[0]->str, master->element[0]->len);
      if (h.empty() || h == "?") h = host;  // a node that never met another knows no address of its own
      const int p = static_cast<int>(master->element[1]->integer);
      int node = -1;
      for (std::size_t n = 0; n < names_.size(); ++n)
        if (names_[n] == h + ":" + std::to_string(p)) node = static_cast<int>(n);
      if (node < 0) {
        open(h, p);
        node = static_cast<int>(nodes_.size() - 1);
      }
      for (long long s = range->element[0]->integer; s <= range->element[1]->integer; ++s)
        slot_node_[static_cast<std::size_t>(s)] = node;
    }
    for (int n : slot_node_)
      if (n < 0) throw std::runtime_error("the cluster does not cover every slot");
  }
  LimitRoutes(const LimitRoutes&) = delete;
  LimitRoutes& operator=(const LimitRoutes&) = delete;
  ~LimitRoutes() {
    for (redisContext* c : nodes_) redisFree(c);
  }

  redisContext* for_key(std::string_view key) const {
    return nodes_[static_cast<std::size_t>(slot_node_[static_cast<std::size_t>(limit_key_slot(key))])];
  }
  const std::vector<redisContext*>& all() const { return nodes_; }

  // Writes every connection's queued commands, so that the masters work on
  // them at once (a blocking read flushes only its own connection).
  void flush_all() const {
    for (redisContext* c : nodes_) {
      int done = 0;
      while (!done)
        if (redisBufferWrite(c, &done) != REDIS_OK) throw std::runtime_error("the limit's write failed");
    }
  }

 private:
  redisContext* open(const std::string& host, int port) {
    redisContext* c = redisConnect(host.c_str(), port);
    if (c == nullptr || c->err) {
      if (c != nullptr) redisFree(c);
      throw std::runtime_error("cannot connect for the hiredis limit to " + host + ":" + std::to_string(port));
    }
    nodes_.push_back(c);
    names_.push_back(host + ":" + std::to_string(port));
    return c;
  }

  std::vector<redisContext*> nodes_;
  std::vector<std::string> names_;
  std::vector<int> slot_node_;  // slot -> index into nodes_
};

}  // namespace dlock::bench

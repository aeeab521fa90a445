#include "support/zk_probe.hpp"

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

namespace dlock::test {
namespace {
void quiet(const char*) {}
}  // namespace

ZkProbe::ZkProbe(const std::string& hosts) {
  zh_ = zookeeper_init2(hosts.c_str(), nullptr, 10000, nullptr, nullptr, 0, &quiet);
  if (!zh_) throw std::runtime_error("zk probe: zookeeper_init failed for " + hosts);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (zoo_state(zh_) != ZOO_CONNECTED_STATE) {
    if (std::chrono::steady_clock::now() > end) {
      zookeeper_close(zh_);
      throw std::runtime_error("zk probe: no session with " + hosts);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

ZkProbe::~ZkProbe() { zookeeper_close(zh_); }

std::vector<std::string> ZkProbe::children(const std::string& path) {
  String_vector v{};
  std::vector<std::string> out;
  if (zoo_get_children(zh_, path.c_str(), 0, &v) != ZOK) return out;
  for (int i = 0; i < v.count; ++i) out.emplace_back(v.data[i]);
  deallocate_String_vector(&v);
  std::sort(out.begin(), out.end());
  return out;
}

bool ZkProbe::exists(const std::string& path) {
  Stat st{};
  return zoo_exists(zh_, path.c_str(), 0, &st) == ZOK;
}

std::int64_t ZkProbe::czxid(const std::string& path) {
  Stat st{};
  return zoo_exists(zh_, path.c_str(), 0, &st) == ZOK ? st.czxid : 0;
}

bool ZkProbe::remove_tree(const std::string& path) {
  for (const auto& c : children(path)) remove_tree(path + "/" + c);
  return zoo_delete(zh_, path.c_str(), -1) == ZOK;
}

std::string ZkProbe::create_sequential(const std::string& prefix, const std::string& data) {
  char made[1024];
  const int rc = zoo_create(zh_, prefix.c_str(), data.data(), static_cast<int>(data.size()), &ZOO_OPEN_ACL_UNSAFE,
                            ZOO_EPHEMERAL_SEQUENTIAL, made, static_cast<int>(sizeof made));
  return rc == ZOK ? std::string(made) : std::string();
}

bool ZkProbe::create_persistent(const std::string& path) {
  const int rc = zoo_create(zh_, path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
  return rc == ZOK || rc == ZNODEEXISTS;
}

std::string ZkProbe::data(const std::string& path) {
  char buf[4096];
  int len = static_cast<int>(sizeof buf);
  Stat st{};
  if (zoo_get(zh_, path.c_str(), 0, buf, &len, &st) != ZOK || len < 0) return {};
  return std::string(buf, static_cast<std::size_t>(len));
}

bool ZkProbe::remove(const std::string& path) { return zoo_delete(zh_, path.c_str(), -1) == ZOK; }

std::vector<std::string> ZkProbe::tree(const std::string& path) {
  std::vector<std::string> out;
  for (const auto& c : children(path)) {
    const std::string p = (path == "/" ? "" : path) + "/" + c;
    out.push_back(p);
    for (auto& below : tree(p)) out.push_back(std::move(below));
  }
  return out;
}

}  // namespace dlock::test

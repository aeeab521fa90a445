// Thread-safe sets of the ZooKeeper backend, shared by its I/O thread and
// the blocking fast path.
#ifndef DLOCK_ZOOKEEPER_HELD_NODES_HPP_
#define DLOCK_ZOOKEEPER_HELD_NODES_HPP_

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

namespace dlock::zookeeper {

// grant -> lock node, shared by the I/O thread and the blocking fast path.
class HeldNodes {
 public:
  void add(std::uint64_t grant, std::string path) {
    std::lock_guard lk(mu_);
    nodes_[grant] = std::move(path);
  }
  std::optional<std::string> find(std::uint64_t grant) const {
    std::lock_guard lk(mu_);
    auto it = nodes_.find(grant);
    return it == nodes_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  void erase(std::uint64_t grant) {
    std::lock_guard lk(mu_);
    nodes_.erase(grant);
  }
  void erase_path(const std::string& path) {
    std::lock_guard lk(mu_);
    std::erase_if(nodes_, [&](const auto& kv) { return kv.second == path; });
  }
  // Empties it; true if anything was held.
  bool clear() {
    std::lock_guard lk(mu_);
    const bool had = !nodes_.empty();
    nodes_.clear();
    return had;
  }
  bool empty() const {
    std::lock_guard lk(mu_);
    return nodes_.empty();
  }

 private:
  mutable std::mutex mu_;
  std::map<std::uint64_t, std::string> nodes_;
};

// Lock nodes seen to exist (a container may still go: a create then fails
// with ZNONODE and the path is made again). Bounded.
class KnownParents {
 public:
  bool contains(const std::string& path) const {
    std::lock_guard lk(mu_);
    return paths_.count(path) != 0;
  }
  void insert(const std::string& path) {
    std::lock_guard lk(mu_);
    if (paths_.size() > 10000) paths_.clear();
    paths_.insert(path);
  }
  void erase(const std::string& path) {
    std::lock_guard lk(mu_);
    paths_.erase(path);
  }

 private:
  mutable std::mutex mu_;
  std::set<std::string> paths_;
};

}  // namespace dlock::zookeeper

#endif  // DLOCK_ZOOKEEPER_HELD_NODES_HPP_

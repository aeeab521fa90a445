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

// A hold: its lock node, and the session that owns the node.
struct HeldNode {
  std::string path, name, owner;
  std::int64_t session = 0;
  bool releasing = false;  // its delete is out: its deletion is no loss
  bool shared = false;     // a read hold or a permit
};

// grant -> hold, shared by the I/O thread and the blocking fast path. Every
// hold is tagged with its session, and only the current session's holds
// are kept: a grant racing with the end of its session (clear(), then a
// new session) is refused rather than kept alive by the next session.
class HeldNodes {
 public:
  // The session whose holds are kept from now on (0: none).
  void set_session(std::int64_t session) {
    std::lock_guard lk(mu_);
    session_ = session;
  }
  // False (nothing kept) if `node` is not the current session's.
  bool add(std::uint64_t grant, HeldNode node) {
    std::lock_guard lk(mu_);
    if (node.session == 0 || node.session != session_) return false;
    nodes_[grant] = std::move(node);
    return true;
  }
  std::optional<std::string> find(std::uint64_t grant) const {
    std::lock_guard lk(mu_);
    auto it = nodes_.find(grant);
    return it == nodes_.end() ? std::nullopt : std::optional<std::string>(it->second.path);
  }
  // The path of a hold about to be released (its deletion is then no loss).
  std::optional<std::string> start_release(std::uint64_t grant) {
    std::lock_guard lk(mu_);
    auto it = nodes_.find(grant);
    if (it == nodes_.end()) return std::nullopt;
    it->second.releasing = true;
    return it->second.path;
  }
  // The hold on `path`, removed, unless it is being released.
  std::optional<std::pair<std::uint64_t, HeldNode>> take_lost(const std::string& path) {
    std::lock_guard lk(mu_);
    for (auto it = nodes_.begin(); it != nodes_.end(); ++it) {
      if (it->second.path != path || it->second.releasing) continue;
      auto out = std::make_pair(it->first, std::move(it->second));
      nodes_.erase(it);
      return out;
    }
    return std::nullopt;
  }
  bool holds_path(const std::string& path) const {
    std::lock_guard lk(mu_);
    for (const auto& [grant, n] : nodes_)
      if (n.path == path && !n.releasing) return true;
    return false;
  }
  // The owner holds `name` in the other mode (an upgrade or a downgrade
  // would wait for its own hold).
  bool holds_other_mode(const std::string& name, const std::string& owner, bool shared) const {
    std::lock_guard lk(mu_);
    for (const auto& [grant, n] : nodes_)
      if (n.name == name && n.owner == owner && n.shared != shared && !n.releasing) return true;
    return false;
  }
  void erase(std::uint64_t grant) {
    std::lock_guard lk(mu_);
    nodes_.erase(grant);
  }
  void erase_path(const std::string& path) {
    std::lock_guard lk(mu_);
    std::erase_if(nodes_, [&](const auto& kv) { return kv.second.path == path; });
  }
  // Empties it and keeps nothing until set_session(); true if anything was held.
  bool clear() {
    std::lock_guard lk(mu_);
    const bool had = !nodes_.empty();
    nodes_.clear();
    session_ = 0;
    return had;
  }
  bool empty() const {
    std::lock_guard lk(mu_);
    return nodes_.empty();
  }

 private:
  mutable std::mutex mu_;
  std::int64_t session_ = 0;
  std::map<std::uint64_t, HeldNode> nodes_;
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

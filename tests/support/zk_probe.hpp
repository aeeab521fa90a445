// tests/support/zk_probe.hpp: a plain synchronous ZooKeeper client for the
// tests to look at (and tamper with) the tree the library writes, beside
// the library rather than through it.
//
//   ZkProbe probe(zk.hosts());
//   EXPECT_TRUE(probe.children("/dlock/job").empty());
#ifndef DLOCK_TESTS_SUPPORT_ZK_PROBE_HPP_
#define DLOCK_TESTS_SUPPORT_ZK_PROBE_HPP_

#include <cstdint>
#include <string>
#include <vector>

typedef struct _zhandle zhandle_t;

namespace dlock::test {

class ZkProbe {
 public:
  // Connects (waits up to 10 s); throws std::runtime_error otherwise.
  explicit ZkProbe(const std::string& hosts);
  ~ZkProbe();
  ZkProbe(const ZkProbe&) = delete;
  ZkProbe& operator=(const ZkProbe&) = delete;

  // Children's names, sorted; empty when the node does not exist.
  std::vector<std::string> children(const std::string& path);
  bool exists(const std::string& path);
  // The node's czxid (0 when it does not exist).
  std::int64_t czxid(const std::string& path);
  // Deletes the node and everything below it; true if it existed.
  bool remove_tree(const std::string& path);
  // Creates an ephemeral sequential node `prefix`<seq> of this probe's
  // session, holding `data`; its full path, or "" on failure.
  std::string create_sequential(const std::string& prefix, const std::string& data = "");
  // A persistent node (its parent must exist); true if made or there.
  bool create_persistent(const std::string& path);
  // The node's data ("" when it does not exist).
  std::string data(const std::string& path);
  // Deletes the node; true if it existed.
  bool remove(const std::string& path);
  // Every node under `path` (full paths, depth first), `path` excluded.
  std::vector<std::string> tree(const std::string& path);

 private:
  zhandle_t* zh_ = nullptr;
};

}  // namespace dlock::test

#endif  // DLOCK_TESTS_SUPPORT_ZK_PROBE_HPP_

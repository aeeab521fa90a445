#include "common/etcd_member.hpp"

#include <chrono>
#include <stdexcept>
#include <thread>

#include "common/etcd_cluster.hpp"

namespace dlock::tools {
std::string start_etcd(const std::filesystem::path& dir, std::vector<Child>& children) {
  if (!etcd_available()) return {};
  std::filesystem::create_directories(dir);
  const std::string client = "http://127.0.0.1:" + std::to_string(free_port());
  const std::string peer = "http://127.0.0.1:" + std::to_string(free_port());
  children.push_back(start_child({"etcd",
                                  "--unsafe-no-fsync",
                                  "--name",
                                  "demo",
                                  "--data-dir",
                                  (dir / "data").string(),
                                  "--listen-client-urls",
                                  client,
                                  "--advertise-client-urls",
                                  client,
                                  "--listen-peer-urls",
                                  peer,
                                  "--initial-advertise-peer-urls",
                                  peer,
                                  "--initial-cluster",
                                  "demo=" + peer,
                                  "--logger",
                                  "zap",
                                  "--log-outputs",
                                  (dir / "etcd.log").string()},
                                 false, (dir / "etcd.out").string()));
  const int port = std::stoi(client.substr(client.rfind(':') + 1));
  for (int i = 0; i < 250 && !port_open(port); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (!port_open(port)) throw std::runtime_error("etcd did not start (see " + dir.string() + ")");
  return "etcd://127.0.0.1:" + std::to_string(port);
}

}  // namespace dlock::tools

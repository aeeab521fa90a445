#include "common/etcd_member.hpp"

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace dlock::tools {
namespace {

bool installed(const char* program) {
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "/usr/bin:/bin";
  for (std::size_t at = 0; at <= dirs.size();) {
    const auto colon = std::min(dirs.find(':', at), dirs.size());
    if (std::filesystem::exists(dirs.substr(at, colon - at) + "/" + program)) return true;
    at = colon + 1;
  }
  return false;
}

}  // namespace

std::string start_etcd(const std::filesystem::path& dir, std::vector<Child>& children) {
  if (!installed("etcd")) return {};
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

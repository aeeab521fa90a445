#include "support/sync_redis.hpp"

#include <stdexcept>

#include "common/sync_redis.hpp"

namespace dlock::test {

struct SyncRedis::Impl {
  explicit Impl(int port, const std::string& password)
      : conn("127.0.0.1", static_cast<std::uint16_t>(port), std::chrono::seconds(5), password) {}
  tools::SyncRedis conn;
};

SyncRedis::SyncRedis(int port, const std::string& password) : impl_(std::make_unique<Impl>(port, password)) {
  std::string why;
  if (!impl_->conn.connect(&why))
    throw std::runtime_error("SyncRedis: cannot connect to port " + std::to_string(port) + ": " + why);
}

SyncRedis::~SyncRedis() = default;

std::string SyncRedis::cmd(const std::vector<std::string>& args) {
  const tools::Reply r = impl_->conn.cmd(args);
  if (r.status != tools::Reply::Status::ok) throw std::runtime_error("SyncRedis: " + r.failure);
  return r.text();
}

long long SyncRedis::integer(const std::vector<std::string>& args) {
  std::string s = cmd(args);
  try {
    return std::stoll(s);
  } catch (...) {
    throw std::runtime_error("SyncRedis: not an integer reply: " + s);
  }
}

}  // namespace dlock::test

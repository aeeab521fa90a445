#include "support/sync_redis.hpp"

#include <hiredis/hiredis.h>

#include <stdexcept>

namespace dlock::test {

struct SyncRedis::Impl {
  redisContext* ctx = nullptr;
};

namespace {
std::string text(const redisReply* r) {
  switch (r->type) {
    case REDIS_REPLY_INTEGER: return std::to_string(r->integer);
    case REDIS_REPLY_NIL: return "(nil)";
    case REDIS_REPLY_ARRAY: {
      std::string out;
      for (size_t i = 0; i < r->elements; ++i) {
        if (i) out += '\n';
        out += text(r->element[i]);
      }
      return out;
    }
    default: return std::string(r->str, r->len);
  }
}
}  // namespace

SyncRedis::SyncRedis(int port, const std::string& password) : impl_(std::make_unique<Impl>()) {
  timeval tv{5, 0};
  impl_->ctx = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (impl_->ctx == nullptr || impl_->ctx->err)
    throw std::runtime_error("SyncRedis: cannot connect to port " + std::to_string(port));
  redisSetTimeout(impl_->ctx, tv);
  if (!password.empty()) cmd({"AUTH", password});
}

SyncRedis::~SyncRedis() {
  if (impl_->ctx) redisFree(impl_->ctx);
}

std::string SyncRedis::cmd(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(redisCommandArgv(impl_->ctx, static_cast<int>(args.size()), argv.data(), lens.data()));
  if (r == nullptr) throw std::runtime_error("SyncRedis: connection error: " + std::string(impl_->ctx->errstr));
  std::string out = text(r);
  freeReplyObject(r);
  return out;
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

#include "common/sync_redis.hpp"

#include <hiredis/hiredis.h>
#include <sys/time.h>

namespace dlock::tools {
namespace {

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

Reply convert(const redisReply* r) {
  Reply out;
  switch (r->type) {
    case REDIS_REPLY_NIL:
      out.is_nil = true;
      break;
    case REDIS_REPLY_INTEGER:
      out.is_integer = true;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ERROR:
      out.is_error = true;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ARRAY:
      out.is_array = true;
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
      break;
    default:
      out.str.assign(r->str, r->len);
      break;
  }
  return out;
}

}  // namespace

std::string Reply::text() const {
  if (status != Status::ok) return failure;
  if (is_nil) return "(nil)";
  if (is_array) {
    std::string out;
    for (std::size_t i = 0; i < elements.size(); ++i) out += (i ? "\n" : "") + elements[i].text();
    return out;
  }
  if (is_integer) return std::to_string(integer);
  return str;
}

SyncRedis::SyncRedis(std::string host, std::uint16_t port, std::chrono::milliseconds timeout, std::string password)
    : host_(std::move(host)), port_(port), timeout_(timeout), password_(std::move(password)) {}

SyncRedis::~SyncRedis() { disconnect(); }

bool SyncRedis::connect(std::string* why) { return ensure_connected(why); }

void SyncRedis::disconnect() {
  if (ctx_) redisFree(ctx_);
  ctx_ = nullptr;
}

bool SyncRedis::ensure_connected(std::string* why) {
  if (ctx_) return true;
  ctx_ = redisConnectWithTimeout(host_.c_str(), port_, to_timeval(timeout_));
  if (!ctx_ || ctx_->err) {
    *why = ctx_ ? ctx_->errstr : "cannot allocate a connection";
    disconnect();
    return false;
  }
  redisSetTimeout(ctx_, to_timeval(timeout_));
  if (!password_.empty()) {
    auto* r = static_cast<redisReply*>(redisCommand(ctx_, "AUTH %b", password_.data(), password_.size()));
    const bool ok = r != nullptr && r->type != REDIS_REPLY_ERROR;
    if (r) freeReplyObject(r);
    if (!ok) {
      *why = "AUTH failed";
      disconnect();
      return false;
    }
  }
  return true;
}

Reply SyncRedis::cmd(const std::vector<std::string>& args) {
  Reply out;
  std::string why;
  if (!ensure_connected(&why)) {
    out.status = Reply::Status::not_sent;
    out.failure = "connect: " + why;
    return out;
  }
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  redisAppendCommandArgv(ctx_, static_cast<int>(args.size()), argv.data(), lens.data());
  // Write everything first: a failure here means the server saw at most a
  // partial command, which it never executes.
  int done = 0;
  while (!done) {
    if (redisBufferWrite(ctx_, &done) != REDIS_OK) {
      out.status = Reply::Status::not_sent;
      out.failure = std::string("write: ") + ctx_->errstr;
      disconnect();
      return out;
    }
  }
  void* raw = nullptr;
  if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) {
    out.status = Reply::Status::unknown;
    out.failure = std::string("no reply: ") + (ctx_->errstr[0] ? ctx_->errstr : "connection closed");
    disconnect();
    return out;
  }
  auto* r = static_cast<redisReply*>(raw);
  out = convert(r);
  freeReplyObject(r);
  return out;
}

}  // namespace dlock::tools

#include "redis/resp.hpp"

#include <hiredis/hiredis.h>

#include <new>

namespace dlock::redis {
namespace {

Reply convert(const redisReply* r) {
  Reply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = Reply::Type::string;
      break;
    case REDIS_REPLY_STATUS:
      out.type = Reply::Type::status;
      break;
    case REDIS_REPLY_ERROR:
      out.type = Reply::Type::error;
      break;
    case REDIS_REPLY_INTEGER:
      out.type = Reply::Type::integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::Type::array;
      break;
    default:
      out.type = Reply::Type::nil;
      break;
  }
  if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR)
    out.str.assign(r->str, r->len);
  out.integer = r->integer;
  if (r->type == REDIS_REPLY_ARRAY) {
    out.elements.reserve(r->elements);
    for (std::size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
  }
  return out;
}

}  // namespace

void append_command(std::string& out, const std::vector<std::string_view>& args) {
  // A short command keeps its argument vectors on the stack.
  constexpr std::size_t kInline = 16;
  const char* argv_inline[kInline];
  size_t len_inline[kInline];
  std::vector<const char*> argv_heap;
  std::vector<size_t> len_heap;
  const char** argv = argv_inline;
  size_t* lens = len_inline;
  if (args.size() > kInline) {
    argv_heap.resize(args.size());
    len_heap.resize(args.size());
    argv = argv_heap.data();
    lens = len_heap.data();
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    argv[i] = args[i].data();
    lens[i] = args[i].size();
  }
  char* cmd = nullptr;
  int n = redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), argv, lens);
  if (n < 0 || cmd == nullptr) throw std::bad_alloc();
  out.append(cmd, static_cast<std::size_t>(n));
  redisFreeCommand(cmd);
}

struct ReplyReader::Impl {
  redisReader* reader = nullptr;
};

ReplyReader::ReplyReader() : impl_(std::make_unique<Impl>()) { reset(); }

ReplyReader::~ReplyReader() {
  if (impl_->reader != nullptr) redisReaderFree(impl_->reader);
}

void ReplyReader::reset() {
  if (impl_->reader != nullptr) redisReaderFree(impl_->reader);
  impl_->reader = redisReaderCreate();
  if (impl_->reader == nullptr) throw std::bad_alloc();
}

void ReplyReader::feed(const char* data, std::size_t size) { redisReaderFeed(impl_->reader, data, size); }

std::optional<Reply> ReplyReader::next(Status& error) {
  void* raw = nullptr;
  if (redisReaderGetReply(impl_->reader, &raw) != REDIS_OK) {
    error = Status(Errc::protocol_error, std::string("malformed reply from server: ") + impl_->reader->errstr);
    return std::nullopt;
  }
  if (raw == nullptr) return std::nullopt;
  auto* r = static_cast<redisReply*>(raw);
  Reply out = convert(r);
  freeReplyObject(r);
  return out;
}

}  // namespace dlock::redis

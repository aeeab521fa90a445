#include "redis/resp.hpp"

#include <hiredis/hiredis.h>

#include <charconv>
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

// RESP's request form, written here: hiredis's formatter prints every
// length with sprintf and returns a buffer of its own to copy and free,
// which a profile of a blocking acquire showed as several % of the client.
void append_command(std::string& out, const std::vector<std::string_view>& args) {
  std::size_t size = 16;
  for (std::string_view a : args) size += a.size() + 24;
  out.reserve(out.size() + size);
  char digits[24];
  auto header = [&](char kind, std::size_t n) {
    out += kind;
    out.append(digits, static_cast<std::size_t>(std::to_chars(digits, digits + sizeof digits, n).ptr - digits));
    out += "\r\n";
  };
  header('*', args.size());
  for (std::string_view a : args) {
    header('$', a.size());
    out += a;
    out += "\r\n";
  }
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

// RESP2 encoding and decoding, on top of hiredis's command formatter and reply
// reader (hiredis does no I/O here; the connection owns the sockets).
#ifndef DLOCK_REDIS_RESP_HPP_
#define DLOCK_REDIS_RESP_HPP_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/error.hpp"

namespace dlock::redis {

struct Reply {
  enum class Type { string, array, integer, nil, status, error };
  Type type = Type::nil;
  long long integer = 0;
  std::string str;  // string, status and error
  std::vector<Reply> elements;

  bool is_error() const { return type == Type::error; }
  bool is_nil() const { return type == Type::nil; }
};

// Appends one command, formatted as a RESP array of bulk strings, to `out`.
void append_command(std::string& out, const std::vector<std::string_view>& args);

// Incremental reply parser. Feed bytes as they arrive; take whole replies.
class ReplyReader {
 public:
  ReplyReader();
  ~ReplyReader();
  ReplyReader(const ReplyReader&) = delete;
  ReplyReader& operator=(const ReplyReader&) = delete;

  void feed(const char* data, std::size_t size);
  // The next whole reply, nullopt when more bytes are needed. A malformed
  // stream sets `error` (Errc::protocol_error) and the reader must be reset.
  std::optional<Reply> next(Status& error);
  void reset();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_RESP_HPP_

// The one plain blocking Redis client (hiredis) of the tests, the tools, the
// benchmarks and the demo, independent of the library under test: the
// verifier's own traffic (naive strategies, protected resources, the
// nemesis' server commands), the tests' look at keys from the outside, the
// benchmarks' server statistics and the demo's stock counter. It tells a
// request that never left (the outcome is known: nothing happened) from one
// whose reply was lost (outcome unknown), which a history must keep apart.
#ifndef DLOCK_TOOLS_COMMON_SYNC_REDIS_HPP_
#define DLOCK_TOOLS_COMMON_SYNC_REDIS_HPP_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

struct redisContext;

namespace dlock::tools {

struct Reply {
  enum class Status {
    ok,        // a reply arrived (possibly an error reply: see is_error)
    not_sent,  // could not connect or write: the command did not happen
    unknown,   // sent, no reply: it may or may not have happened
  };
  Status status = Status::ok;
  bool is_nil = false;
  bool is_error = false;
  bool is_integer = false;
  bool is_array = false;
  long long integer = 0;
  std::string str;  // bulk/status/error text
  std::vector<Reply> elements;
  std::string failure;  // text of not_sent / unknown
  bool good() const { return status == Status::ok && !is_error; }
  // As text: integers in decimal, nil as "(nil)", arrays joined by '\n',
  // errors as their message; a failure as its `failure` text.
  std::string text() const;
};

class SyncRedis {
 public:
  // Connects lazily; a broken connection is reconnected on the next command
  // (and authenticated again when `password` is set). `timeout` bounds the
  // connect and each reply.
  SyncRedis(std::string host, std::uint16_t port, std::chrono::milliseconds timeout, std::string password = {});
  ~SyncRedis();
  SyncRedis(const SyncRedis&) = delete;
  SyncRedis& operator=(const SyncRedis&) = delete;

  Reply cmd(const std::vector<std::string>& args);
  // Connects now; false (with the reason in *why) if it cannot.
  bool connect(std::string* why);
  void disconnect();

 private:
  bool ensure_connected(std::string* why);
  std::string host_;
  std::uint16_t port_;
  std::chrono::milliseconds timeout_;
  std::string password_;
  redisContext* ctx_ = nullptr;
};

}  // namespace dlock::tools

#endif  // DLOCK_TOOLS_COMMON_SYNC_REDIS_HPP_

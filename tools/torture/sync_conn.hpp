// A blocking Redis connection for the verifier's own traffic: the naive
// strategies, the protected resources and the nemesis' server commands.
// Independent of the library under test. It tells a request that never left
// (the outcome is known: nothing happened) from one whose reply was lost
// (outcome unknown), which the history must keep apart.
#ifndef DLOCK_TORTURE_SYNC_CONN_HPP_
#define DLOCK_TORTURE_SYNC_CONN_HPP_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

struct redisContext;

namespace torture {

struct Reply {
  enum class Status {
    ok,        // a reply arrived (possibly an error reply: see is_error)
    not_sent,  // could not connect or write: the command did not happen
    unknown,   // sent, no reply: it may or may not have happened
  };
  Status status = Status::ok;
  bool is_nil = false;
  bool is_error = false;
  long long integer = 0;
  std::string str;  // bulk/status/error text
  std::vector<Reply> elements;
  std::string failure;  // text of not_sent / unknown
  bool good() const { return status == Status::ok && !is_error; }
};

class SyncConn {
 public:
  // Connects lazily; a broken connection is reconnected on the next command.
  SyncConn(std::string host, std::uint16_t port, std::chrono::milliseconds timeout);
  ~SyncConn();
  SyncConn(const SyncConn&) = delete;
  SyncConn& operator=(const SyncConn&) = delete;

  Reply cmd(const std::vector<std::string>& args);
  void disconnect();

 private:
  bool ensure_connected(std::string* why);
  std::string host_;
  std::uint16_t port_;
  std::chrono::milliseconds timeout_;
  redisContext* ctx_ = nullptr;
};

}  // namespace torture

#endif  // DLOCK_TORTURE_SYNC_CONN_HPP_

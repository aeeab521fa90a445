// What `dlock run` says while it waits: on a terminal, one status line kept
// current (what it waits for, who holds it and for how long, or that the
// server does not answer and it keeps trying); elsewhere (cron, a log), one
// line once the wait has lasted a while, so that a quick wait prints
// nothing.
#ifndef DLOCK_TOOLS_DLOCK_WAIT_STATUS_HPP_
#define DLOCK_TOOLS_DLOCK_WAIT_STATUS_HPP_

#include <chrono>
#include <dlock/client.hpp>
#include <future>
#include <optional>
#include <string>

namespace dlock::cli {

// The text of one status: "waiting for 'NAME' (held by H for 12 s, fence 3;
// waited 5 s)". `info`: the last inspect (nullopt: none yet), `error`: the
// last inspect's failure (empty: none).
std::string wait_status_text(const std::string& what, const std::optional<dlock::LockInfo>& info,
                             const std::string& error, std::chrono::milliseconds waited);

// "H for 12.3 s" or "H": who holds a lock, for messages.
std::string holder_text(const dlock::LockInfo& info);

class WaitStatus {
 public:
  // `what`: "'NAME'" or "a permit of 'NAME'"; `terminal`: stderr is one.
  // `quiet`: say nothing at all.
  WaitStatus(const dlock::Client& client, std::string name, std::string what, bool terminal, bool quiet);
  // Waits for an inspect still running (at most the client's command
  // timeout), then clears the line.
  ~WaitStatus();
  WaitStatus(const WaitStatus&) = delete;
  WaitStatus& operator=(const WaitStatus&) = delete;

  // Called about once a second while waiting.
  void tick();
  // The wait is over: the status line goes.
  void finish();

 private:
  void show(const std::string& text);

  const dlock::Client& client_;
  std::string name_;
  std::string what_;
  bool terminal_;
  bool quiet_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::future<dlock::Result<dlock::LockInfo>> looking_;  // an inspect in flight
  std::optional<dlock::LockInfo> info_;
  std::string error_;
  bool shown_ = false;     // a line is on the terminal
  bool reported_ = false;  // the one line (not a terminal) was written
  bool finished_ = false;
};

}  // namespace dlock::cli

#endif  // DLOCK_TOOLS_DLOCK_WAIT_STATUS_HPP_

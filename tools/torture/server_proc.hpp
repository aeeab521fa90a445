// A private redis-server process for one run: started on a loopback port in
// the run directory, optionally under the clock shim, killed and restarted on
// the nemesis' orders, always stopped at the end.
#ifndef DLOCK_TORTURE_SERVER_PROC_HPP_
#define DLOCK_TORTURE_SERVER_PROC_HPP_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/child_process.hpp"

namespace torture {

// The ACL user dlock's workers connect as on every Redis server of a run
// (the nemesis and the naive strategies use the default user): a fault can
// take its rights away while the default user keeps working.
constexpr const char* kTortureUser = "torture";
constexpr const char* kTorturePassword = "torture-pw";
// "torture:torture-pw@", for a Redis URL.
inline std::string torture_userinfo() { return std::string(kTortureUser) + ":" + kTorturePassword + "@"; }

struct ServerSpec {
  std::string binary = "redis-server";
  std::string dir;                      // working directory, log, AOF
  std::uint16_t port = 0;               // 0: pick a free one
  bool aof_always = false;              // appendonly yes + appendfsync always
  std::string clock_shim;               // LD_PRELOAD library, empty: none
  std::string clock_file;               // the shim's offset file
  std::vector<std::string> extra_args;  // e.g. --replicaof 127.0.0.1 PORT
  std::string config_file;              // given first (a sentinel's, which it rewrites); "": none
};

class ServerProc {
 public:
  explicit ServerProc(ServerSpec spec);
  ~ServerProc();  // SIGKILL if still running
  ServerProc(const ServerProc&) = delete;
  ServerProc& operator=(const ServerProc&) = delete;

  void start();  // throws std::runtime_error if it does not answer PING in 5 s
  void kill9();  // SIGKILL and reap
  void stop();   // SIGTERM, reap (SIGKILL after 3 s)
  int pid() const { return pid_; }
  std::uint16_t port() const { return spec_.port; }
  const ServerSpec& spec() const { return spec_; }

 private:
  ServerSpec spec_;
  int pid_ = -1;
};

// tools/common's (one for every test, tool and experiment).
inline std::uint16_t free_port() { return static_cast<std::uint16_t>(dlock::tools::free_port()); }

// Runs argv to its end (at most `timeout_s`), output appended to `log`;
// its exit status, -1 if it had to be killed (tools/common's).
inline int run_to_end(const std::vector<std::string>& args, const std::string& log, int timeout_s) {
  return dlock::tools::run_to_end(args, log, std::chrono::seconds(timeout_s));
}
// "7.0.15", or "unknown".
std::string redis_version(const std::string& binary);

}  // namespace torture

#endif  // DLOCK_TORTURE_SERVER_PROC_HPP_

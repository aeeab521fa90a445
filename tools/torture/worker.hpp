// One worker process of a run: acquire -> read -> think -> write -> release,
// in a loop, logging every operation to its own history file.
#ifndef DLOCK_TORTURE_WORKER_HPP_
#define DLOCK_TORTURE_WORKER_HPP_

#include <cstdint>
#include <string>
#include <vector>

namespace torture {

struct WorkerArgs {
  std::string proc;  // "w0"...
  int inc = 1;
  int slot = 0;
  std::string strategy;
  std::vector<std::uint16_t> lock_ports;  // lock server(s), through the proxies
  std::string lock_url;                   // the whole URL (cluster, Sentinel); "": from lock_ports
  std::string sqlite_path;                // the lock file of strategy sqlite
  std::string user;                       // PostgreSQL role or etcd user:password; "": the default
  std::uint16_t resource_port = 0;        // resource server, direct
  std::int64_t ttl_ms = 1000;
  std::int64_t think_ms = 20;  // think U(think_min, think) between read and write
  std::int64_t think_min_ms = 0;
  std::int64_t wait_ms = 3000;  // acquire wait
  std::string history;          // file
  std::string slots;            // file
  int slot_count = 0;
  std::uint64_t seed = 1;
  // "name=pause:0.1,name=kill:0.05": at failpoint `name`, with that
  // probability, stop (SIGSTOP, resumed by the nemesis) or kill itself.
  std::string failpoints;
  unsigned permits = 3;  // semaphore strategies: N
};

// The protected resources' scripts (Redis EVAL). Fenced register: accepts a
// write only if its fence is not below the highest fence it has accepted;
// every write gets the server's order ({accepted, seq}). Unfenced register:
// accepts everything, in the server's order (seq).
extern const char* const kFencedWriteLua;
extern const char* const kUnfencedWriteLua;

// Runs until SIGTERM, then finishes the current iteration. Returns the exit
// status.
int worker_main(const WorkerArgs& args);

}  // namespace torture

#endif  // DLOCK_TORTURE_WORKER_HPP_

// One run: servers, proxy, workers, the scenario's nemesis, then the
// checkers and the report files.
#ifndef DLOCK_TORTURE_RUN_HPP_
#define DLOCK_TORTURE_RUN_HPP_

#include <cstdint>
#include <string>

#include "report.hpp"

namespace torture {

struct RunConfig {
  std::string scenario;
  std::string strategy;
  std::int64_t duration_ms = 10000;
  std::uint64_t seed = 1;
  int workers = 4;
  std::int64_t ttl_ms = 1000;
  std::int64_t think_ms = 20;
  std::string out_dir;     // the run's directory, created
  std::string self_exe;    // this program, run again as the workers
  std::string clock_shim;  // the LD_PRELOAD clock shim
  std::string redis_server = "redis-server";
  unsigned permits = 3;  // semaphore strategies: N
};

// Writes history/, report.txt, report.json and timeline.html into out_dir.
// Throws std::runtime_error if the run could not be set up.
RunReport run_one(const RunConfig& config);

}  // namespace torture

#endif  // DLOCK_TORTURE_RUN_HPP_

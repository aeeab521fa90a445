// The verifier's one pass over a history's events, shared by the checkers
// (analysis.cpp) and the linearizability search (model_check.cpp).
#ifndef DLOCK_TORTURE_ANALYSIS_INDEX_HPP_
#define DLOCK_TORTURE_ANALYSIS_INDEX_HPP_

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "history.hpp"

namespace torture {

inline constexpr std::int64_t kNsPerMs = 1'000'000;
inline constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

// Nanoseconds to milliseconds, rounded to nearest (durations are >= 0).
inline std::int64_t to_ms(std::int64_t ns) { return (ns + kNsPerMs / 2) / kNsPerMs; }

inline bool is_instant_fault(const std::string& kind) { return kind == "kill" || kind == "crash"; }
inline bool is_worker(const std::string& target) { return target != "server" && target != "all" && !target.empty(); }

// ---------------------------------------------------------------------------
// One pass over the events: acquires paired with their outcome, the first
// release of each grant, lost notifications, deaths and incarnations.

struct AcquireRec {
  std::string proc;
  int inc = 0;
  std::int64_t invoke_t = 0;
  std::int64_t done_t = kNever;  // kNever: no outcome logged
  std::string phase;             // ok | fail | info | "" (no outcome)
  std::string grant;
  std::uint64_t fence = 0;
  std::string kind;  // Event::kind of the invoke or outcome
};

struct ReleaseRec {
  std::int64_t invoke_t = 0;
  std::int64_t done_t = kNever;
  std::string phase;  // "" until an outcome is seen
};

struct Index {
  std::vector<AcquireRec> acquires;                               // in invoke order
  std::unordered_map<std::string, ReleaseRec> releases;           // first release per grant
  std::unordered_map<std::string, std::int64_t> lost;             // first "lost" per grant
  std::map<std::string, std::vector<std::int64_t>> deaths;        // proc -> times
  std::vector<std::int64_t> deaths_all;                           // kill/crash of "all"
  std::map<std::string, std::map<int, std::int64_t>> first_seen;  // proc -> inc -> t
  std::int64_t first_t = 0, last_t = 0;
};

Index index_events(const std::vector<Event>& events);

// First time at or after `from` at which incarnation `inc` of `proc` is known
// dead: a kill/crash of it, or (should that event be missing) the first event
// of a later incarnation. kNever if it outlived the history.
std::int64_t death_after(const Index& ix, const std::string& proc, int inc, std::int64_t from);

}  // namespace torture

#endif  // DLOCK_TORTURE_ANALYSIS_INDEX_HPP_

// Checkers over one run's history (history.hpp). Pure functions: no I/O, no
// clock; unit-tested on hand-written histories.
//
// Vocabulary
//   grant    one successful acquire: [invoke, ok] of op "acquire" with
//            phase ok, identified by Event::grant.
//   hold     what the grantee *believes*: from the acquire's ok until the
//            first of: its release's invoke, a "lost" event of that grant
//            (the library told it the lock is gone), the death of its
//            process (a "fault" kill/crash event targeting the proc or "all",
//            a "failpoint" kill it logged, or failing those the first event
//            of its next incarnation), or the end of the run.
//   fault    a window [start, end] from the nemesis' "fault" events: phase
//            "invoke" starts, phase "ok" ends (paired by kind and target in
//            order); kinds with no end event (kill, crash) are instants.
#ifndef DLOCK_TORTURE_ANALYSIS_HPP_
#define DLOCK_TORTURE_ANALYSIS_HPP_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "history.hpp"

namespace torture {

// What the checkers need to know beyond the events.
struct RunInfo {
  std::string scenario;
  std::string strategy;
  std::int64_t ttl_ms = 0;             // lease / expiry the strategy uses
  std::int64_t recovery_slack_ms = 0;  // epsilon on top of the TTL bound
  std::int64_t run_start_t = 0;        // CLOCK_MONOTONIC ns
  std::int64_t run_end_t = 0;
  // The recipe the strategy drives (recipe_check.hpp): "" (a plain mutex),
  // fair, rw, semaphore or election.
  std::string recipe;
  unsigned permits = 1;  // semaphore: the run's N
  // Line order: how long after its acquire began a waiter is surely counted
  // in the line by the server (its first request answered or retried: the
  // client's command timeout). 0: the line-order check is skipped.
  std::int64_t line_join_bound_ms = 0;
};

struct Hold {
  std::string grant;
  std::string proc;
  int inc = 0;
  std::int64_t invoke_t = 0;  // acquire invoke
  std::int64_t ok_t = 0;      // acquire ok (the grant)
  std::int64_t end_t = 0;     // end of belief, see above
  std::string end_reason;     // release | lost | killed | end-of-run
  std::uint64_t fence = 0;    // 0: strategy has none
  std::string release_phase;  // ok | fail | info | "" (never released)
  std::string kind;           // the acquire's Event::kind: "" (a mutex's),
                              // shared | exclusive (SharedMutex), permit,
                              // leader, fair
};

struct FaultWindow {
  std::string kind;    // pause, failpoint-pause, late-reply, kill, crash,
                       // restart, client-clock, server-clock, partition,
                       // delay, drop, reset, client-pause, debug-sleep...
  std::string target;  // "w3", "server", "all"
  std::int64_t start_t = 0;
  std::int64_t end_t = 0;
  std::string proof;  // detail of the invoke event
};

// How the findings name a fault window: "pause of w2 (2177 ms)".
std::string fault_label(const FaultWindow& w);

// Fault kinds after which an overlap is explained by a documented timing
// assumption: the earlier holder stopped (pause, or its replies were held
// back past the lease), the server's clock jumped, or the server forgot the
// lock (restart without persistence, failover to an asynchronous replica).
bool explains_overlap(const std::string& kind);

struct Overlap {
  std::string first_grant;  // the hold that began first
  std::string second_grant;
  std::int64_t start_t = 0;  // overlap of the two holds
  std::int64_t end_t = 0;
  bool explained = false;
  std::string explanation;  // e.g. "pause of w2 (3012 ms) during its hold"
  // The two grants' fences (0: none). second > first: once the second
  // holder wrote, the fenced register refuses the first.
  std::uint64_t first_fence = 0;
  std::uint64_t second_fence = 0;
  bool fenced() const { return first_fence != 0 && second_fence > first_fence; }
};

// Two accepted register writes out of grant order: `stale` (of an earlier
// grant) was accepted after `newer` (of a grant that definitely began after
// the stale grant's ok), i.e. a superseded holder overwrote its successor.
struct StaleWrite {
  std::string op;  // fenced_write | unfenced_write
  std::string stale_grant;
  std::string newer_grant;
  std::int64_t stale_seq = 0;
  std::int64_t newer_seq = 0;
  std::int64_t t = 0;
};

struct FenceAnomaly {
  std::string earlier_grant;  // definitely granted before `later_grant`
  std::string later_grant;
  std::uint64_t earlier_fence = 0;
  std::uint64_t later_fence = 0;  // not greater: anomaly
};

// A release reported ok while the lock belonged, by the history, to another
// grant that had been given after the releaser's and still believed it held
// it: the release touched another owner's lock.
struct ForeignRelease {
  std::string releaser_grant;
  std::string victim_grant;
  std::int64_t t = 0;
};

struct Recovery {
  std::string dead_grant;  // the grant held by the process that died
  std::int64_t death_t = 0;
  std::optional<std::int64_t> next_grant_t;  // none: never granted again
  std::int64_t recovery_ms = -1;             // -1 when never
  bool within_bound = false;                 // <= ttl + slack
};

// ---- recipes (recipe_check.hpp) --------------------------------------------

// A waiter that was in the line before another acquire began and was still
// in it when that acquire was granted (line order, recipe_check.hpp).
struct LineOvertake {
  std::string waiter;     // the grant or "<proc>/<inc> acquire at <ms>"
  std::string overtaker;  // the grant given first
  std::int64_t waiter_invoke_t = 0;
  std::int64_t overtaker_invoke_t = 0;
  std::int64_t overtaker_ok_t = 0;
  std::int64_t waiter_end_t = 0;  // its outcome, or its death
  std::string waiter_outcome;     // ok | fail | info | died
  bool excused = false;
  std::string excuse;  // the fault that may have dropped it
};

// An interval with more permit holders than permits.
struct CapacityExcess {
  std::int64_t start_t = 0, end_t = 0;
  int holders = 0;                  // the most at once in the interval
  std::vector<std::string> grants;  // holding at its start
  bool explained = false;
  std::string explanation;
};

// A permit lost with its holder (killed, or paused past its lease), and
// how long until N holders other than it held at once again: its permit
// was granted again by then.
struct PermitRecovery {
  std::string grant;
  std::string cause;              // killed | pause | failpoint-pause
  std::int64_t t = 0;             // death, or the pause's start
  std::int64_t recovery_ms = -1;  // -1: N holders never seen again
};

struct RecipeFindings {
  std::string recipe;  // "" when the run drives no recipe
  // fair, election: line order.
  std::int64_t line_join_bound_ms = 0;
  std::int64_t line_pairs_judged = 0;  // (waiter in line, later grant) pairs
  std::int64_t line_overtakes = 0;     // unexcused
  std::int64_t line_overtakes_excused = 0;
  std::vector<LineOvertake> overtakes;  // unexcused first; kMaxListed
  // rw.
  std::int64_t shared_grants = 0, exclusive_grants = 0;
  std::int64_t reader_overlaps = 0;     // pairs of reads held at once
  std::int64_t reader_overlap_max = 0;  // most readers at once
  // semaphore.
  unsigned permits = 0;
  int max_holders = 0;  // most permit holders at once
  std::int64_t excess_unexplained = 0, excess_explained = 0;
  std::vector<CapacityExcess> excesses;  // unexplained first; kMaxListed
  std::vector<PermitRecovery> permit_recoveries;
  // election.
  std::int64_t terms = 0;             // distinct terms granted
  std::int64_t term_clashes = 0;      // two leaders with one term
  std::vector<std::string> clashes;   // "w0/1/3 and w2/1/5: term 17"
  std::int64_t leader_writes = 0;     // fenced writes by leaders
  std::int64_t deposed_writes = 0;    // made after a higher term was granted
  std::int64_t deposed_rejected = 0;  // refused by the resource
  std::int64_t deposed_accepted = 0;  // accepted before the successor wrote
  std::int64_t deposed_unknown = 0;   // no reply
};

struct OpCounts {
  std::int64_t invoke = 0, ok = 0, fail = 0, info = 0;
};

struct ModelResult {
  std::string verdict;  // valid | invalid | unknown
  std::string detail;   // counterexample or why unknown
  std::int64_t ops_judged = 0;
};

// Long lists of one kind of finding keep this many entries; counts stay exact.
inline constexpr std::size_t kMaxListed = 100;

struct Findings {
  std::map<std::string, OpCounts> ops;  // by op name
  std::vector<Hold> holds;
  std::vector<FaultWindow> faults;
  std::vector<Overlap> overlaps;
  std::int64_t unexplained_overlaps = 0;
  std::int64_t overlap_total_ms = 0;
  std::int64_t overlap_max_ms = 0;
  ModelResult model;
  std::vector<StaleWrite> stale_writes;  // both registers, the first
                                         // kMaxListed of each
  std::int64_t stale_fenced = 0;         // accepted by the fenced register
  std::int64_t stale_unfenced = 0;       // accepted by the unfenced one
  std::int64_t fenced_accepted = 0, fenced_rejected = 0;
  std::int64_t counter_acked = 0;             // counter_write ok
  std::optional<std::int64_t> counter_final;  // "final" event, kind counter
  std::int64_t lost_updates = 0;              // max(0, acked - final)
  double lost_pct = 0;                        // of acked
  std::vector<FenceAnomaly> fence_anomalies;  // the first kMaxListed
  std::int64_t fence_anomaly_count = 0;       // all of them
  std::vector<ForeignRelease> foreign_releases;
  std::vector<Recovery> recoveries;
  std::int64_t lockouts = 0;         // deaths never followed by a grant
                                     // although the bound passed
  std::int64_t losses_notified = 0;  // "lost" events
  // Waiters woken by a release notification ("wakeups" counters of each
  // worker incarnation), per ok release: 1 is the ideal, a herd wakes every
  // waiter. -1: the strategy does not count them.
  std::int64_t wakeups = -1;
  double wakeups_per_release = 0;
  // Holds that ended by a loss notification: told before the next grant of
  // the lock to anyone else, or after it (the holder believed too long).
  std::int64_t losses_told_first = 0, losses_told_late = 0;
  // A crowd's fairness: the most grants to other workers while one acquire
  // waited (from its invoke to its outcome or its worker's death; not those
  // made while its worker was stopped), and the workers that asked and were
  // never granted.
  std::int64_t waited_through_max = 0;
  std::int64_t starved = 0;
  std::int64_t grants = 0;
  double grants_per_s = 0;
  std::int64_t acquire_p50_ms = 0, acquire_p99_ms = 0, acquire_max_ms = 0;  // invoke->ok
  std::int64_t max_unavailable_ms = 0;                                      // longest gap with no hold while
                                                                            // some acquire was pending
  RecipeFindings recipe;
};

Findings analyze(const std::vector<Event>& events, const RunInfo& info);

// Linearizability of the acquire/release history against an owner-aware
// mutex (state: free or held by one grant), Wing-Gong-Lowe search with a
// memo of (linearized set, state). ok ops must be linearized inside their
// [invoke, ok] window; info ops may be linearized any time after invoke or
// not at all; fail ops did not happen. A lease that ended without a release
// is modelled as a release by its grant: after a "lost" event, a release in
// [grant ok, lost t]; after the holder's death, an info release from the
// death on. A release that failed or has no known outcome may take effect
// any time after its invoke, or never; a release invoked after the loss or
// death was known is left out (a no-op by contract; ForeignRelease catches
// one that was not). Gives up with "unknown" after `max_states` search states.
// An invalid verdict's detail names the op that could not be linearized at
// the deepest point reached, with times in ms since the first event.
ModelResult check_mutex_model(const std::vector<Event>& events, const std::vector<Hold>& holds,
                              std::int64_t max_states = 2'000'000);

// What a scenario's documentation says a strategy may show.
struct Expectation {
  bool overlap_allowed = false;        // explained overlaps are documented
  bool fence_anomaly_allowed = false;  // e.g. fence counter lost on restart
  bool lost_updates_allowed = false;   // unfenced counter under overlap
  bool must_be_caught = false;         // a naive strategy that must fail here
  std::int64_t min_grants = 5;         // checker health: enough judged
  std::int64_t min_faults = 0;         // checker health: faults proven applied
  // A crowd (0: not judged): the most grants one acquire may wait through,
  // and the most wake-ups per release; no asking worker may starve.
  std::int64_t max_waited_through = 0;
  double max_wakeups_per_release = 0;
  std::string assumption;  // text for the report
};

struct Verdict {
  bool pass = false;                    // the run met its expectation
  bool caught = false;                  // some violation was found
  std::vector<std::string> violations;  // "unexplained overlap x3", ...
  std::vector<std::string> problems;    // why pass is false
};

// Safety violations always count: unexplained overlaps, stale writes accepted
// at the fenced register, foreign releases, lock-outs and recoveries past the
// bound; explained overlaps, an invalid model, fence anomalies and lost
// updates count unless the expectation allows them. An expected-safe run
// passes with none of those and healthy checkers (min_grants, min_faults); a
// must_be_caught run passes only if caught. overlap_allowed also allows an
// invalid model (it sees the same double grants); otherwise an "unknown"
// model fails an expected-safe run: unknown is never a pass.
Verdict judge(const Findings& f, const Expectation& e);

}  // namespace torture

#endif  // DLOCK_TORTURE_ANALYSIS_HPP_

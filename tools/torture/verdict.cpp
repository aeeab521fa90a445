// judge() (analysis.hpp): what a run's findings amount to, held against the
// expectation its scenario documents.
#include <algorithm>
#include <cstdio>

#include "analysis.hpp"
#include "analysis_index.hpp"
#include "recipe_check.hpp"

namespace torture {
namespace {

std::string plural(std::int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// The verdict as it is built: every violation found, and those of them the
// expectation does not allow.
struct Tally {
  Verdict v;
  std::vector<std::string> forbidden;

  void found(std::string what, bool allowed) {
    if (allowed)
      what += " (documented: allowed here)";
    else
      forbidden.push_back(what);
    v.violations.push_back(std::move(what));
    v.caught = true;
  }
};

// Two holders at once, writes or releases of a holder that lost the lock,
// and a lock that stayed taken after its holder died.
void tally_lock_safety(const Findings& f, const Expectation& e, Tally& t) {
  std::int64_t max_unexplained = 0, max_explained = 0;
  for (const Overlap& o : f.overlaps) {
    std::int64_t& m = o.explained ? max_explained : max_unexplained;
    m = std::max(m, to_ms(o.end_t - o.start_t));
  }
  const auto explained = static_cast<std::int64_t>(f.overlaps.size()) - f.unexplained_overlaps;
  if (f.unexplained_overlaps > 0)
    t.found(plural(f.unexplained_overlaps, "unexplained overlap", "unexplained overlaps") + " (max " +
                std::to_string(max_unexplained) + " ms)",
            false);
  if (explained > 0)
    t.found(plural(explained, "explained overlap", "explained overlaps") + " (max " + std::to_string(max_explained) +
                " ms)",
            e.overlap_allowed);
  if (f.stale_fenced > 0)
    t.found(plural(f.stale_fenced, "stale write", "stale writes") + " accepted by the fenced register", false);
  if (!f.foreign_releases.empty())
    t.found(plural(static_cast<std::int64_t>(f.foreign_releases.size()), "foreign release", "foreign releases"), false);
  if (f.lockouts > 0) t.found(plural(f.lockouts, "lock-out", "lock-outs") + " after a holder's death", false);
  std::int64_t late = 0, late_max = 0;
  for (const Recovery& r : f.recoveries)
    if (r.next_grant_t && !r.within_bound) {
      ++late;
      late_max = std::max(late_max, r.recovery_ms);
    }
  if (late > 0)
    t.found(plural(late, "recovery", "recoveries") + " past the bound (max " + std::to_string(late_max) + " ms)",
            false);
}

// What a scenario may document as the price of its fault: an invalid mutex
// model (the same double grants as the overlaps), fences out of order, lost
// updates.
void tally_documented_costs(const Findings& f, const Expectation& e, Tally& t) {
  if (f.model.verdict == "invalid") t.found("mutex model invalid: " + f.model.detail, e.overlap_allowed);
  const std::int64_t anomalies =
      std::max<std::int64_t>(f.fence_anomaly_count, static_cast<std::int64_t>(f.fence_anomalies.size()));
  if (anomalies > 0) t.found(plural(anomalies, "fence anomaly", "fence anomalies"), e.fence_anomaly_allowed);
  if (f.lost_updates > 0) {
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.1f", f.lost_pct);
    t.found(plural(f.lost_updates, "lost update", "lost updates") + " (" + pct + "% of acked)", e.lost_updates_allowed);
  }
}

// The recipes' own checks (recipe_check.hpp).
void tally_recipe(const RecipeFindings& rf, const Expectation& e, Tally& t) {
  if (rf.line_overtakes > 0)
    t.found(plural(rf.line_overtakes, "waiter", "waiters") + " overtaken in the line by a later arrival", false);
  if (rf.excess_unexplained > 0)
    t.found(plural(rf.excess_unexplained, "interval", "intervals") + " with more than " + std::to_string(rf.permits) +
                " permit holders (unexplained)",
            false);
  if (rf.excess_explained > 0)
    t.found(plural(rf.excess_explained, "interval", "intervals") + " with more than " + std::to_string(rf.permits) +
                " permit holders (explained)",
            e.overlap_allowed);
  if (rf.term_clashes > 0)
    t.found(plural(rf.term_clashes, "term", "terms") + " with two leaders", e.fence_anomaly_allowed);
}

// Checker health: a run that judged too little proves nothing, unless it
// is a control that was caught (a lock-out leaves few grants to judge).
void check_health(const Findings& f, const Expectation& e, Verdict& v) {
  if (f.grants < e.min_grants && !(e.must_be_caught && v.caught))
    v.problems.push_back("checker health: " + plural(f.grants, "grant", "grants") + " judged, need " +
                         std::to_string(e.min_grants));
  const auto faults = static_cast<std::int64_t>(f.faults.size());
  if (faults < e.min_faults)
    v.problems.push_back("checker health: " + plural(faults, "fault", "faults") + " applied, need " +
                         std::to_string(e.min_faults));

  if (e.max_waited_through > 0 && f.waited_through_max > e.max_waited_through)
    v.problems.push_back("crowd: a waiter waited through " + std::to_string(f.waited_through_max) +
                         " grants to others (bound " + std::to_string(e.max_waited_through) + ")");
  if (e.max_waited_through > 0 && f.starved > 0)
    v.problems.push_back("crowd: " + plural(f.starved, "worker", "workers") + " asked and were never granted");
  if (e.max_wakeups_per_release > 0 && f.wakeups_per_release > e.max_wakeups_per_release)
    v.problems.push_back("crowd: " + std::to_string(f.wakeups_per_release) + " wake-ups per release (bound " +
                         std::to_string(e.max_wakeups_per_release) + ")");

  const RecipeFindings& rf = f.recipe;
  if (rf.recipe == "fair" && rf.line_join_bound_ms > 0 && rf.line_pairs_judged == 0)
    v.problems.push_back("checker health: no waiter was in the line while a later arrival was granted");
  if (rf.recipe == "rw" && rf.reader_overlaps == 0)
    v.problems.push_back("checker health: readers never held at once (" + std::to_string(rf.shared_grants) +
                         " reads, " + std::to_string(rf.exclusive_grants) + " writes)");
  if (rf.recipe == "semaphore" && rf.max_holders < static_cast<int>(rf.permits))
    v.problems.push_back("checker health: at most " + std::to_string(rf.max_holders) + " of " +
                         std::to_string(rf.permits) + " permits held at once");
}

}  // namespace

Verdict judge(const Findings& f, const Expectation& e) {
  Tally t;
  tally_lock_safety(f, e, t);
  tally_documented_costs(f, e, t);
  tally_recipe(f.recipe, e, t);
  Verdict& v = t.v;
  check_health(f, e, v);
  if (e.must_be_caught) {
    if (!v.caught) v.problems.push_back("not caught: this strategy must show a violation here");
  } else {
    for (const std::string& what : t.forbidden) v.problems.push_back("violation: " + what);
    // "unknown" is never a pass where the model's answer matters.
    if (f.model.verdict == "unknown" && !e.overlap_allowed)
      v.problems.push_back("checker health: mutex model unknown (" + f.model.detail + ")");
  }
  v.pass = v.problems.empty();
  return v;
}

}  // namespace torture

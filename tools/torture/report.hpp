// Renders one run, or a suite of runs, as text, JSON and an HTML timeline.
#ifndef DLOCK_TORTURE_REPORT_HPP_
#define DLOCK_TORTURE_REPORT_HPP_

#include <string>
#include <utility>
#include <vector>

#include "analysis.hpp"
#include "history.hpp"

namespace torture {

struct RunReport {
  RunInfo info;
  Expectation expect;
  Findings findings;
  Verdict verdict;
  // Set-up lines in order: ("redis", "7.0.15"), ("workers", "4"), ("seed", "1")...
  std::vector<std::pair<std::string, std::string>> setup;
};

// A table a person reads in a terminal: set-up, operations by outcome, faults
// with their proof, violations by kind, lost updates, recovery times, and the
// expectation with the verdict.
std::string render_text(const RunReport& r);
// The same content, machine-readable (one JSON object).
std::string render_json(const RunReport& r);
// A self-contained HTML page (inline SVG, no scripts from the network): one
// lane per worker with its holds as bars, lost notifications, fault windows,
// and overlaps / stale writes / foreign releases marked in red.
std::string render_html(const RunReport& r, const std::vector<Event>& events);
// One row per run: scenario, strategy, grants, faults, overlaps (explained /
// unexplained), stale accepted (fenced / unfenced), lost updates, fence
// anomalies, foreign releases, recovery max, verdict.
std::string render_suite_text(const std::vector<RunReport>& runs);
std::string render_suite_json(const std::vector<RunReport>& runs);

}  // namespace torture

#endif  // DLOCK_TORTURE_REPORT_HPP_

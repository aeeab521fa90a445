// Formatting and figures shared by the text and JSON reports and the HTML
// timeline.
#ifndef DLOCK_TORTURE_REPORT_FORMAT_HPP_
#define DLOCK_TORTURE_REPORT_FORMAT_HPP_

#include <cstdint>
#include <string>

#include "analysis.hpp"

namespace torture {

struct RunReport;

// `v` with `decimals` digits after the point.
std::string fixed(double v, int decimals);
// PASS or FAIL.
std::string verdict_word(const Verdict& v);
// The verdict in one line that does not contradict itself: "PASS: no
// violations found in N lock operations under F faults", "PASS: 3 overlaps,
// all explained (pause x3)", "PASS: the control was caught (...)", or
// "FAIL: <the first problem>".
std::string verdict_headline(const RunReport& r);
// Seconds since the run's start, for people.
std::string secs(std::int64_t t, const RunInfo& info);
// Nanoseconds as whole milliseconds, rounded.
std::int64_t ms_of(std::int64_t ns);
// The longest recovery after a holder's death, -1 if none.
std::int64_t recovery_max_ms(const Findings& f);
std::int64_t explained_overlaps(const Findings& f);

}  // namespace torture

#endif  // DLOCK_TORTURE_REPORT_FORMAT_HPP_

// Formatting shared by the text/JSON report and the HTML timeline.
#ifndef DLOCK_TORTURE_REPORT_FORMAT_HPP_
#define DLOCK_TORTURE_REPORT_FORMAT_HPP_

#include <cstdint>
#include <string>

#include "analysis.hpp"

namespace torture {

// `v` with `decimals` digits after the point.
std::string fixed(double v, int decimals);
// PASS or FAIL.
std::string verdict_word(const Verdict& v);
// Seconds since the run's start, for people.
std::string secs(std::int64_t t, const RunInfo& info);
// Nanoseconds as whole milliseconds, rounded.
std::int64_t ms_of(std::int64_t ns);

}  // namespace torture

#endif  // DLOCK_TORTURE_REPORT_FORMAT_HPP_

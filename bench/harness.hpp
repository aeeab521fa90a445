// The measuring harness the benchmark programs share: their flags, the
// timed loop of pairs, the statistics over samples and reps, the JSON result
// line, and the error and temp-dir handling around a run. Nothing here is
// dlock's code.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::bench {

using Clock = std::chrono::steady_clock;

// CLOCK_MONOTONIC in ns: one clock for every process on the host, so that
// the events of forked workers can be ordered against each other.
long long mono_ns();

// The sample at rank floor(p * n) of the sorted samples (0 if there are
// none). dlock-bench and dlock-recipes-bench keep rank rules of their own:
// their results are compared with other libraries' under those.
double percentile(std::vector<double> v, double p);
double median(std::vector<double> v);  // percentile(v, 0.5)

// What every comparison program takes: how long each client runs, how many
// times (the results are medians over the reps), and where the JSON goes.
struct RunFlags {
  double seconds = 3;
  int reps = 3;
  std::string json;
};

// "--name value" pairs, each value stored in the variable added for it.
class Flags {
 public:
  explicit Flags(RunFlags& run);  // --seconds, --reps, --json
  Flags& add(const std::string& name, double& v);
  Flags& add(const std::string& name, int& v);
  Flags& add(const std::string& name, std::string& v);
  // False for a flag not added, one without its value, or a number that is not one.
  bool parse(int argc, char** argv) const;

 private:
  std::map<std::string, std::function<void(const std::string&)>> set_;
};
// Says "usage: <synopsis>" on stderr; returns `status`, the program's.
int usage(std::string_view synopsis, int status);

// Sequential pairs: how many per second, and the median pair's latency.
struct Pairs {
  double per_s = 0, p50_us = 0;
};

// Runs pair(i) for i = 0, 1, ... until `seconds` have passed. A template, so
// that the timed loop calls the pair directly.
template <class Pair>
Pairs run_pairs(double seconds, Pair pair) {
  std::vector<double> lat;
  lat.reserve(100000);
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  long long i = 0;
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    pair(i++);
    lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return {static_cast<double>(i) / std::chrono::duration<double>(Clock::now() - start).count(),
          percentile(std::move(lat), 0.5)};
}

// Each client's W1 pairs over the reps, and the table of their medians
// beside the limit's.
class PairsByClient {
 public:
  void add(const std::string& client, const Pairs& p);
  double rate(const std::string& client) const;  // median pairs/s; 0 for a client not run
  double p50(const std::string& client) const;
  // A header, then per client in the order first added: pairs/s, p50 and
  // pairs/s over the limit's; the first column `width` characters wide.
  void print(const std::string& limit, int width) const;

 private:
  std::vector<std::string> clients_;
  std::map<std::string, std::vector<double>> rate_, p50_;
};

// A JSON object on one line, its fields in the order added; numbers as an
// ostream writes them by default (6 significant digits for a double).
class JsonLine {
 public:
  template <class Number>
  JsonLine& num(std::string_view key, Number v) {
    std::ostringstream o;
    o << v;
    return raw(key, o.str());
  }
  JsonLine& str(std::string_view key, std::string_view v);
  JsonLine& raw(std::string_view key, std::string_view json);
  std::string text() const { return body_ + "}"; }
  // The line, and a newline, into the file at `path` (none if it is empty).
  void write(const std::string& path) const;

 private:
  std::string body_ = "{";
};

// The fields of a result map, in key order ({"a": 1, "b": "x"}); the values
// are JSON already.
std::string json_object(const std::map<std::string, std::string>& fields);
// A number for such a map, to 10 significant digits.
std::string num(double v);

// body()'s exit status, or 1 if it threw (said on stderr as "<program>: <what>").
int exit_status(const std::string& program, const std::function<int()>& body);
// The same with a new temp dir for body's files, removed afterwards.
int in_temp_dir(const std::string& program, const std::function<int(const std::string& dir)>& body);
// Runs body(k) in `n` forked processes, k = 0..n-1, each exiting with what
// it returns, and waits for them all. Throws std::runtime_error naming
// `what` if one did not exit with 0.
void in_processes(int n, const std::function<int(int k)>& body, const std::string& what);

}  // namespace dlock::bench

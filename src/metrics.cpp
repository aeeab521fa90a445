// The Prometheus text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/):
//   # HELP <name> <text, with \ and newline escaped>
//   # TYPE <name> counter|gauge|histogram
//   <name>{<label>="<value, with \, " and newline escaped>",...} <value>
// one family's lines together, each family once; a histogram's samples are
// <name>_bucket{...,le="<bound>"} (cumulative, ending with le="+Inf"),
// <name>_sum and <name>_count.
#include "dlock/metrics.hpp"

#include <charconv>
#include <functional>
#include <set>
#include <string_view>

#include "dlock/error.hpp"

namespace dlock {
namespace {

bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }

void check_prefix(std::string_view prefix) {
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    const char c = prefix[i];
    if (!(c == ':' || (i == 0 ? name_start(c) : name_char(c))))
      throw Error(Errc::invalid_argument,
                  "metric prefix '" + std::string(prefix) + "': must match [a-zA-Z_:][a-zA-Z0-9_:]* (or be empty)");
  }
}

// The label names the families set themselves.
constexpr std::string_view kReserved[] = {"backend", "outcome", "reason", "le", "lock"};

void check_labels(const PrometheusLabels& labels, std::set<std::string>& seen) {
  for (const auto& [name, value] : labels) {
    bool ok = !name.empty() && name_start(name[0]) && name.rfind("__", 0) != 0;
    for (char c : name) ok = ok && name_char(c);
    if (!ok)
      throw Error(Errc::invalid_argument,
                  "label name '" + name + "': must match [a-zA-Z_][a-zA-Z0-9_]* and not begin with \"__\"");
    for (std::string_view r : kReserved)
      if (name == r) throw Error(Errc::invalid_argument, "label name '" + name + "' is one the metrics set themselves");
    if (!seen.insert(name).second) throw Error(Errc::invalid_argument, "label name '" + name + "' given twice");
  }
}

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlong
// forms, no surrogates, at most U+10FFFF), or 0.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](std::size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

// A label value between its quotes: \, " and newline escaped, and bytes that
// are not UTF-8 replaced by U+FFFD (the format is UTF-8).
void append_value(std::string& out, std::string_view v) {
  for (std::size_t i = 0; i < v.size();) {
    const std::size_t n = utf8_length(v, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    const char c = v[i];
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out.append(v, i, n);
    i += n;
  }
}

void append_label(std::string& out, std::string_view name, std::string_view value) {
  if (!out.empty()) out += ',';
  out += name;
  out += "=\"";
  append_value(out, value);
  out += '"';
}

std::string render_labels(const PrometheusLabels& labels) {
  std::string out;
  for (const auto& [name, value] : labels) append_label(out, name, value);
  return out;
}

std::string number(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

class Writer {
 public:
  explicit Writer(const std::string& prefix) : prefix_(prefix) {}

  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += prefix_;
    out_ += name;
    out_ += ' ';
    for (char c : help) {
      if (c == '\\')
        out_ += "\\\\";
      else if (c == '\n')
        out_ += "\\n";
      else
        out_ += c;
    }
    out_ += "\n# TYPE ";
    out_ += prefix_;
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  // labels: rendered, without braces; extra: one more label (empty: none).
  void sample(std::string_view name, const std::string& labels, std::string_view value,
              std::string_view extra_name = {}, std::string_view extra_value = {}) {
    out_ += prefix_;
    out_ += name;
    std::string all = labels;
    if (!extra_name.empty()) append_label(all, extra_name, extra_value);
    if (!all.empty()) {
      out_ += '{';
      out_ += all;
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }

  std::string take() { return std::move(out_); }

 private:
  const std::string& prefix_;
  std::string out_;
};

using Get = std::function<std::uint64_t(const ClientStats&)>;

struct Counter {
  std::string_view name;
  std::string_view help;
  Get get;
};

// One client: its stats and its rendered labels.
struct Source {
  const ClientStats* stats;
  std::string labels;
};

std::string render(const std::vector<Source>& sources, const std::string& prefix) {
  Writer w(prefix);
  const auto counter = [&](std::string_view name, std::string_view help, const Get& get) {
    w.family(name, "counter", help);
    for (const auto& s : sources) w.sample(name, s.labels, std::to_string(get(*s.stats)));
  };
  // A counter split by one label.
  const auto split = [&](std::string_view name, std::string_view help, std::string_view label,
                         std::initializer_list<std::pair<std::string_view, Get>> parts) {
    w.family(name, "counter", help);
    for (const auto& s : sources)
      for (const auto& [value, get] : parts) w.sample(name, s.labels, std::to_string(get(*s.stats)), label, value);
  };

  counter("grants_total", "Acquire calls granted (re-entries included).",
          [](const ClientStats& s) { return s.grants; });
  counter("late_grants_total", "Grants whose reply came back after the lease's validity (undone).",
          [](const ClientStats& s) { return s.late_grants; });
  counter("busy_answers_total", "Acquire attempts answered: held by another owner.",
          [](const ClientStats& s) { return s.busy_answers; });
  split("waits_total", "Acquire calls that waited for a busy lock, by how the wait ended.", "outcome",
        {{"granted", [](const ClientStats& s) { return s.waits_granted; }},
         {"timeout", [](const ClientStats& s) { return s.waits_timed_out; }},
         {"error", [](const ClientStats& s) { return s.waits_failed; }}});

  w.family("wait_seconds", "histogram", "How long the acquire calls that waited took, from the call to its end.");
  for (const auto& s : sources) {
    const ClientStats& st = *s.stats;
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < ClientStats::kWaitBucketsMs.size(); ++i) {
      cumulative += st.wait_buckets[i];
      w.sample("wait_seconds_bucket", s.labels, std::to_string(cumulative), "le",
               number(static_cast<double>(ClientStats::kWaitBucketsMs[i]) / 1000.0));
    }
    cumulative += st.wait_buckets.back();
    w.sample("wait_seconds_bucket", s.labels, std::to_string(cumulative), "le", "+Inf");
    w.sample("wait_seconds_sum", s.labels, number(static_cast<double>(st.wait_time_us_sum) / 1e6));
    w.sample("wait_seconds_count", s.labels, std::to_string(cumulative));
  }

  counter("wakeups_total", "Waiters woken by a release notification.", [](const ClientStats& s) { return s.wakeups; });
  w.family("leases_held", "gauge", "Locks held now (distinct name and owner).");
  for (const auto& s : sources) w.sample("leases_held", s.labels, std::to_string(s.stats->leases_held));
  split("leases_lost_total", "Locks lost while held, by reason.", "reason",
        {{"expired", [](const ClientStats& s) { return s.lost_expired; }},
         {"taken", [](const ClientStats& s) { return s.lost_taken; }},
         {"unreachable", [](const ClientStats& s) { return s.lost_unreachable; }},
         {"wrong_type", [](const ClientStats& s) { return s.lost_wrong_type; }}});
  counter("renewals_total", "Lease renewals the server confirmed.", [](const ClientStats& s) { return s.renewals; });
  counter("renewal_failures_total", "Lease renewals not confirmed (no answer, connection error): retried.",
          [](const ClientStats& s) { return s.renewal_failures; });
  counter("renewal_round_trips_total", "Renewal batches sent.",
          [](const ClientStats& s) { return s.renewal_round_trips; });
  counter("outcome_unknown_total", "Requests whose reply was lost (outcome unknown; settled by the client).",
          [](const ClientStats& s) { return s.outcome_unknown; });
  counter("release_failures_total", "Failed releases nobody could be told about.",
          [](const ClientStats& s) { return s.release_failures; });
  counter("commands_sent_total", "Commands sent to the lock service.",
          [](const ClientStats& s) { return s.commands_sent; });
  counter("reconnects_total", "Connections re-established.", [](const ClientStats& s) { return s.reconnects; });
  return w.take();
}

}  // namespace

std::string to_prometheus(const ClientStats& stats, const PrometheusOptions& options) {
  const LabeledStats one{stats, {}};
  // A copy of one ClientStats is cheap next to the text.
  return to_prometheus(std::span<const LabeledStats>(&one, 1), options);
}

std::string to_prometheus(std::span<const LabeledStats> clients, const PrometheusOptions& options) {
  check_prefix(options.prefix);
  std::vector<Source> sources;
  std::set<std::string> series;
  for (const auto& c : clients) {
    std::set<std::string> names;
    check_labels(options.labels, names);
    check_labels(c.labels, names);
    std::string labels;
    append_label(labels, "backend", c.stats.backend);
    for (const auto& [name, value] : options.labels) append_label(labels, name, value);
    for (const auto& [name, value] : c.labels) append_label(labels, name, value);
    if (!series.insert(labels).second)
      throw Error(Errc::invalid_argument, "two clients have the same labels {" + labels + "}: give each its own");
    sources.push_back({&c.stats, std::move(labels)});
  }
  return render(sources, options.prefix);
}

std::string locks_to_prometheus(std::span<const InspectedLock> locks, const PrometheusOptions& options) {
  check_prefix(options.prefix);
  std::set<std::string> names;
  check_labels(options.labels, names);
  const std::string base = render_labels(options.labels);
  std::set<std::string> seen;  // as written: names that are not UTF-8 may become the same
  for (const auto& l : locks) {
    std::string shown;
    append_value(shown, l.name);
    if (!seen.insert(shown).second)
      throw Error(Errc::invalid_argument, "lock \"" + shown + "\" given twice: its samples would collide");
  }

  Writer w(options.prefix);
  const auto gauge = [&](std::string_view name, std::string_view help,
                         const std::function<std::string(const LockInfo&)>& value, bool all = true) {
    w.family(name, "gauge", help);
    for (const auto& l : locks)
      if (all || l.info.waiters) w.sample(name, base, value(l.info), "lock", l.name);
  };
  gauge("lock_held", "1 when the lock is held, 0 when free.",
        [](const LockInfo& i) { return std::string(i.held ? "1" : "0"); });
  gauge("lock_fence", "The fence of the lock's current grant (0: free).",
        [](const LockInfo& i) { return std::to_string(i.fence); });
  gauge("lock_remaining_seconds", "Lease left (0: free, or kept by a session).",
        [](const LockInfo& i) { return number(static_cast<double>(i.remaining.count()) / 1000.0); });
  gauge("lock_holders", "Grants holding the lock now (readers, permits).",
        [](const LockInfo& i) { return std::to_string(i.holders); });
  gauge(
      "lock_waiters", "Clients waiting for the lock, as the server sees them.",
      [](const LockInfo& i) { return std::to_string(i.waiters.value_or(0)); }, false);
  return w.take();
}

}  // namespace dlock

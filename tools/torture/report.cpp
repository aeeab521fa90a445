#include "report.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_map>

namespace torture {
namespace {

using nlohmann::json;

constexpr std::size_t kTextRows = 20;  // rows of one finding list shown in text

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Seconds since the run's start, for people.
std::string secs(std::int64_t t, const RunInfo& info) {
  return fixed(static_cast<double>(t - info.run_start_t) / 1e9, 3);
}

std::int64_t ms_of(std::int64_t ns) { return (ns + 500'000) / 1'000'000; }

// A text table: columns sized to their widest cell; the columns named in
// `right` (numbers) are right-aligned. A header is just the first row.
class Table {
 public:
  explicit Table(std::set<std::size_t> right = {}) : right_(std::move(right)) {}
  Table& add(std::vector<std::string> row) {
    rows_.push_back(std::move(row));
    return *this;
  }
  std::string render(const std::string& indent) const {
    std::vector<std::size_t> width;
    for (const auto& row : rows_)
      for (std::size_t c = 0; c < row.size(); ++c) {
        if (width.size() <= c) width.push_back(0);
        width[c] = std::max(width[c], row[c].size());
      }
    std::string out;
    for (const auto& row : rows_) {
      std::string line = indent;
      for (std::size_t c = 0; c < row.size(); ++c) {
        const std::string pad(width[c] - row[c].size(), ' ');
        line += right_.count(c) ? pad + row[c] : row[c] + pad;
        if (c + 1 < row.size()) line += "  ";
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
    return out;
  }

 private:
  std::set<std::size_t> right_;
  std::vector<std::vector<std::string>> rows_;
};

std::string more(std::size_t shown, std::int64_t total) {
  if (static_cast<std::int64_t>(shown) >= total) return {};
  return "    ... " + std::to_string(total - static_cast<std::int64_t>(shown)) + " more\n";
}

std::int64_t recovery_max_ms(const Findings& f) {
  std::int64_t m = -1;
  for (const Recovery& r : f.recoveries) m = std::max(m, r.recovery_ms);
  return m;
}

std::int64_t explained_overlaps(const Findings& f) {
  return static_cast<std::int64_t>(f.overlaps.size()) - f.unexplained_overlaps;
}

std::string verdict_word(const Verdict& v) { return v.pass ? "PASS" : "FAIL"; }

// ---------------------------------------------------------------------------
// Text.

std::string text_setup(const RunReport& r) {
  const RunInfo& i = r.info;
  Table t;
  t.add({"scenario", i.scenario});
  t.add({"strategy", i.strategy});
  t.add({"ttl", std::to_string(i.ttl_ms) + " ms (recovery slack " + std::to_string(i.recovery_slack_ms) + " ms)"});
  t.add({"run length", fixed(static_cast<double>(i.run_end_t - i.run_start_t) / 1e9, 1) + " s"});
  for (const auto& [k, v] : r.setup) t.add({k, v});
  return "SET-UP\n" + t.render("  ");
}

std::string text_operations(const RunReport& r) {
  const Findings& f = r.findings;
  Table t({1, 2, 3, 4});
  t.add({"op", "invoke", "ok", "fail", "info"});
  for (const auto& [op, c] : f.ops) {
    if (op == "fault" || op == "final") continue;  // shown in their own sections
    t.add({op, std::to_string(c.invoke), std::to_string(c.ok), std::to_string(c.fail), std::to_string(c.info)});
  }
  Table s;
  s.add({"grants", std::to_string(f.grants) + " (" + fixed(f.grants_per_s, 1) + "/s)"});
  s.add({"acquire latency", "p50 " + std::to_string(f.acquire_p50_ms) + " ms, p99 " +
                                std::to_string(f.acquire_p99_ms) + " ms, max " + std::to_string(f.acquire_max_ms) +
                                " ms"});
  s.add({"max unavailable", std::to_string(f.max_unavailable_ms) + " ms (no holder while an acquire waited)"});
  s.add({"losses notified", std::to_string(f.losses_notified)});
  s.add({"fenced register", "accepted " + std::to_string(f.fenced_accepted) + ", rejected " +
                                std::to_string(f.fenced_rejected)});
  s.add({"model checker", std::to_string(f.model.ops_judged) + " ops judged"});
  return "OPERATIONS\n" + t.render("  ") + "\n" + s.render("  ");
}

std::string text_faults(const RunReport& r) {
  const auto& faults = r.findings.faults;
  std::string out = "FAULTS (" + std::to_string(faults.size()) + ")\n";
  if (faults.empty()) return out + "  none\n";
  Table t({2, 3});
  t.add({"kind", "target", "start s", "ms", "proof"});
  for (std::size_t i = 0; i < faults.size() && i < 2 * kTextRows; ++i) {
    const FaultWindow& w = faults[i];
    t.add({w.kind, w.target, secs(w.start_t, r.info), std::to_string(ms_of(w.end_t - w.start_t)), w.proof});
  }
  return out + t.render("  ") + more(std::min(faults.size(), 2 * kTextRows), static_cast<std::int64_t>(faults.size()));
}

std::string text_violations(const RunReport& r) {
  const Findings& f = r.findings;
  std::string out = "VIOLATIONS\n";
  Table s;
  s.add({"overlaps", std::to_string(f.overlaps.size()) + " (unexplained " + std::to_string(f.unexplained_overlaps) +
                         ", explained " + std::to_string(explained_overlaps(f)) + "), total " +
                         std::to_string(f.overlap_total_ms) + " ms, max " + std::to_string(f.overlap_max_ms) + " ms"});
  s.add({"mutex model", f.model.verdict + (f.model.detail.empty() ? "" : ": " + f.model.detail)});
  s.add({"stale writes", "fenced " + std::to_string(f.stale_fenced) + ", unfenced " +
                             std::to_string(f.stale_unfenced) + " (accepted after a newer grant's write)"});
  s.add({"fence anomalies", std::to_string(f.fence_anomaly_count)});
  s.add({"foreign releases", std::to_string(f.foreign_releases.size())});
  out += s.render("  ");
  if (!f.overlaps.empty()) {
    Table t({2, 3});
    t.add({"first", "second", "start s", "ms", "explained by"});
    std::size_t n = 0;
    for (; n < f.overlaps.size() && n < kTextRows; ++n) {
      const Overlap& o = f.overlaps[n];
      t.add({o.first_grant, o.second_grant, secs(o.start_t, r.info), std::to_string(ms_of(o.end_t - o.start_t)),
             o.explained ? o.explanation : "UNEXPLAINED"});
    }
    out += "\n  overlaps\n" + t.render("    ") + more(n, static_cast<std::int64_t>(f.overlaps.size()));
  }
  if (!f.stale_writes.empty()) {
    Table t({3, 4, 5});
    t.add({"register", "stale grant", "newer grant", "stale seq", "newer seq", "t s"});
    std::size_t n = 0;
    for (; n < f.stale_writes.size() && n < kTextRows; ++n) {
      const StaleWrite& w = f.stale_writes[n];
      t.add({w.op, w.stale_grant, w.newer_grant, std::to_string(w.stale_seq), std::to_string(w.newer_seq),
             secs(w.t, r.info)});
    }
    out += "\n  stale writes\n" + t.render("    ") + more(n, f.stale_fenced + f.stale_unfenced);
  }
  if (!f.fence_anomalies.empty()) {
    Table t({1, 3});
    t.add({"earlier grant", "fence", "later grant", "fence"});
    std::size_t n = 0;
    for (; n < f.fence_anomalies.size() && n < kTextRows; ++n) {
      const FenceAnomaly& a = f.fence_anomalies[n];
      t.add({a.earlier_grant, std::to_string(a.earlier_fence), a.later_grant, std::to_string(a.later_fence)});
    }
    out += "\n  fence anomalies\n" + t.render("    ") + more(n, f.fence_anomaly_count);
  }
  if (!f.foreign_releases.empty()) {
    Table t({2});
    t.add({"releaser", "victim", "t s"});
    std::size_t n = 0;
    for (; n < f.foreign_releases.size() && n < kTextRows; ++n) {
      const ForeignRelease& x = f.foreign_releases[n];
      t.add({x.releaser_grant, x.victim_grant, secs(x.t, r.info)});
    }
    out += "\n  foreign releases\n" + t.render("    ") +
           more(n, static_cast<std::int64_t>(f.foreign_releases.size()));
  }
  return out;
}

std::string text_lost_updates(const RunReport& r) {
  const Findings& f = r.findings;
  std::string line = "  counter acked " + std::to_string(f.counter_acked) + ", final " +
                     (f.counter_final ? std::to_string(*f.counter_final) : std::string("(not read)")) + ", lost " +
                     std::to_string(f.lost_updates) + " (" + fixed(f.lost_pct, 1) + "% of acked)\n";
  return "LOST UPDATES\n" + line;
}

std::string text_recovery(const RunReport& r) {
  const Findings& f = r.findings;
  const std::int64_t bound = r.info.ttl_ms + r.info.recovery_slack_ms;
  std::string out = "RECOVERY (bound " + std::to_string(bound) + " ms = ttl + slack)\n";
  if (f.recoveries.empty()) return out + "  no holder died\n";
  Table t({1, 2, 3});
  t.add({"dead grant", "death s", "next grant s", "ms", "within bound"});
  std::size_t n = 0;
  for (; n < f.recoveries.size() && n < kTextRows; ++n) {
    const Recovery& x = f.recoveries[n];
    t.add({x.dead_grant, secs(x.death_t, r.info), x.next_grant_t ? secs(*x.next_grant_t, r.info) : "never",
           x.recovery_ms >= 0 ? std::to_string(x.recovery_ms) : "-", x.within_bound ? "yes" : "NO"});
  }
  return out + t.render("  ") + more(n, static_cast<std::int64_t>(f.recoveries.size())) + "  lock-outs " +
         std::to_string(f.lockouts) + "\n";
}

std::string text_verdict(const RunReport& r) {
  const Expectation& e = r.expect;
  std::vector<std::string> allowed;
  if (e.overlap_allowed) allowed.push_back("explained overlaps");
  if (e.fence_anomaly_allowed) allowed.push_back("fence anomalies");
  if (e.lost_updates_allowed) allowed.push_back("lost updates");
  std::string allowed_text;
  for (const auto& a : allowed) allowed_text += (allowed_text.empty() ? "" : ", ") + a;
  Table t;
  if (!e.assumption.empty()) t.add({"assumption", e.assumption});
  t.add({"allowed", allowed_text.empty() ? "none" : allowed_text});
  t.add({"must be caught", e.must_be_caught ? "yes (a control that must fail)" : "no"});
  t.add({"health", "min grants " + std::to_string(e.min_grants) + ", min faults " + std::to_string(e.min_faults)});
  std::string out = "EXPECTATION\n" + t.render("  ") + "\nVERDICT  " + verdict_word(r.verdict) +
                    (r.verdict.pass ? " (the run met its expectation)" : " (the run did not meet its expectation)") +
                    "\n  caught: " + (r.verdict.caught ? "yes" : "no") + "\n";
  if (r.verdict.violations.empty())
    out += "  no violations found in " + std::to_string(r.findings.model.ops_judged) + " lock operations under " +
           std::to_string(r.findings.faults.size()) + " faults\n";
  for (const auto& v : r.verdict.violations) out += "  violation: " + v + "\n";
  for (const auto& p : r.verdict.problems) out += "  problem:   " + p + "\n";
  return out;
}

// ---------------------------------------------------------------------------
// JSON.

json run_json(const RunReport& r) {
  const Findings& f = r.findings;
  json j;
  j["scenario"] = r.info.scenario;
  j["strategy"] = r.info.strategy;
  j["ttl_ms"] = r.info.ttl_ms;
  j["recovery_slack_ms"] = r.info.recovery_slack_ms;
  j["run_ms"] = ms_of(r.info.run_end_t - r.info.run_start_t);
  json setup = json::object();
  for (const auto& [k, v] : r.setup) setup[k] = v;
  j["setup"] = setup;

  json ops = json::object();
  for (const auto& [op, c] : f.ops) ops[op] = {{"invoke", c.invoke}, {"ok", c.ok}, {"fail", c.fail}, {"info", c.info}};
  j["operations"] = ops;
  j["grants"] = f.grants;
  j["grants_per_s"] = f.grants_per_s;
  j["acquire_ms"] = {{"p50", f.acquire_p50_ms}, {"p99", f.acquire_p99_ms}, {"max", f.acquire_max_ms}};
  j["max_unavailable_ms"] = f.max_unavailable_ms;
  j["losses_notified"] = f.losses_notified;
  j["fenced_register"] = {{"accepted", f.fenced_accepted}, {"rejected", f.fenced_rejected}};

  json faults = json::array();
  for (const FaultWindow& w : f.faults)
    faults.push_back({{"kind", w.kind},
                      {"target", w.target},
                      {"start_s", static_cast<double>(w.start_t - r.info.run_start_t) / 1e9},
                      {"duration_ms", ms_of(w.end_t - w.start_t)},
                      {"proof", w.proof}});
  j["faults"] = faults;

  json overlaps = json::array();
  for (std::size_t i = 0; i < f.overlaps.size() && i < kMaxListed; ++i) {
    const Overlap& o = f.overlaps[i];
    overlaps.push_back({{"first", o.first_grant},
                        {"second", o.second_grant},
                        {"start_s", static_cast<double>(o.start_t - r.info.run_start_t) / 1e9},
                        {"ms", ms_of(o.end_t - o.start_t)},
                        {"explained", o.explained},
                        {"explanation", o.explanation}});
  }
  j["overlaps"] = {{"total", f.overlaps.size()},
                   {"unexplained", f.unexplained_overlaps},
                   {"explained", explained_overlaps(f)},
                   {"total_ms", f.overlap_total_ms},
                   {"max_ms", f.overlap_max_ms},
                   {"list", overlaps}};
  j["model"] = {{"verdict", f.model.verdict}, {"detail", f.model.detail}, {"ops_judged", f.model.ops_judged}};

  json stale = json::array();
  for (const StaleWrite& w : f.stale_writes)
    stale.push_back({{"op", w.op},
                     {"stale_grant", w.stale_grant},
                     {"newer_grant", w.newer_grant},
                     {"stale_seq", w.stale_seq},
                     {"newer_seq", w.newer_seq}});
  j["stale_writes"] = {{"fenced", f.stale_fenced}, {"unfenced", f.stale_unfenced}, {"list", stale}};

  json anomalies = json::array();
  for (const FenceAnomaly& a : f.fence_anomalies)
    anomalies.push_back({{"earlier_grant", a.earlier_grant},
                         {"earlier_fence", a.earlier_fence},
                         {"later_grant", a.later_grant},
                         {"later_fence", a.later_fence}});
  j["fence_anomalies"] = {{"count", f.fence_anomaly_count}, {"list", anomalies}};

  json foreign = json::array();
  for (const ForeignRelease& x : f.foreign_releases)
    foreign.push_back({{"releaser", x.releaser_grant}, {"victim", x.victim_grant}});
  j["foreign_releases"] = {{"count", f.foreign_releases.size()}, {"list", foreign}};

  j["lost_updates"] = {{"acked", f.counter_acked},
                       {"final", f.counter_final ? json(*f.counter_final) : json(nullptr)},
                       {"lost", f.lost_updates},
                       {"pct", f.lost_pct}};

  json rec = json::array();
  for (const Recovery& x : f.recoveries)
    rec.push_back({{"dead_grant", x.dead_grant},
                   {"death_s", static_cast<double>(x.death_t - r.info.run_start_t) / 1e9},
                   {"recovery_ms", x.next_grant_t ? json(x.recovery_ms) : json(nullptr)},
                   {"within_bound", x.within_bound}});
  j["recovery"] = {{"bound_ms", r.info.ttl_ms + r.info.recovery_slack_ms},
                   {"max_ms", recovery_max_ms(f)},
                   {"lockouts", f.lockouts},
                   {"list", rec}};

  const Expectation& e = r.expect;
  j["expectation"] = {{"overlap_allowed", e.overlap_allowed},
                      {"fence_anomaly_allowed", e.fence_anomaly_allowed},
                      {"lost_updates_allowed", e.lost_updates_allowed},
                      {"must_be_caught", e.must_be_caught},
                      {"min_grants", e.min_grants},
                      {"min_faults", e.min_faults},
                      {"assumption", e.assumption}};
  j["verdict"] = {{"pass", r.verdict.pass},
                  {"caught", r.verdict.caught},
                  {"violations", r.verdict.violations},
                  {"problems", r.verdict.problems}};
  return j;
}

std::string dump(const json& j) { return j.dump(2, ' ', false, json::error_handler_t::replace); }

// ---------------------------------------------------------------------------
// HTML timeline.

std::string esc(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// Worker lanes in natural order: w2 before w10.
bool lane_less(const std::string& a, const std::string& b) {
  auto num = [](const std::string& s) {
    return s.size() > 1 && s[0] == 'w' && s.find_first_not_of("0123456789", 1) == std::string::npos
               ? std::stoll(s.substr(1))
               : -1LL;
  };
  const long long na = num(a), nb = num(b);
  if (na >= 0 && nb >= 0) return na < nb;
  if ((na >= 0) != (nb >= 0)) return na >= 0;
  return a < b;
}

std::string grant_colour(const std::string& grant) {
  const std::size_t h = std::hash<std::string>{}(grant);
  return "hsl(" + std::to_string(h % 360) + ",55%," + std::to_string(45 + (h / 360) % 20) + "%)";
}

const char* fault_colour(const std::string& kind) {
  static const std::map<std::string, const char*> colours = {
      {"pause", "#f0a020"},         {"failpoint-pause", "#e07020"}, {"late-reply", "#c060c0"},
      {"kill", "#000000"},          {"crash", "#000000"},           {"restart", "#6060e0"},
      {"client-clock", "#20a0a0"},  {"server-clock", "#2080c0"},    {"partition", "#808080"},
      {"delay", "#a0a040"},         {"drop", "#a06040"},            {"reset", "#a04060"},
      {"client-pause", "#d0b000"},  {"debug-sleep", "#60a060"}};
  auto it = colours.find(kind);
  return it == colours.end() ? "#909090" : it->second;
}

class Svg {
 public:
  Svg(std::int64_t start, std::int64_t end, std::size_t lanes) : start_(start), end_(std::max(end, start + 1)) {
    const double secs_total = static_cast<double>(end_ - start_) / 1e9;
    plot_w_ = std::clamp(secs_total * 40.0, 1600.0 - kLeft, 16000.0);  // >= 40 px/s, scroll if long
    height_ = kTop + static_cast<double>(lanes) * kLane + 30;
  }
  double x(std::int64_t t) const {
    const double f = static_cast<double>(t - start_) / static_cast<double>(end_ - start_);
    return kLeft + std::clamp(f, 0.0, 1.0) * plot_w_;
  }
  static double lane_y(std::size_t lane) { return kTop + static_cast<double>(lane) * kLane; }
  double width() const { return kLeft + plot_w_ + 20; }
  double height() const { return height_; }
  double plot_bottom() const { return height_ - 30; }

  static constexpr double kLeft = 60, kTop = 20, kLane = 28;

 private:
  std::int64_t start_, end_;
  double plot_w_ = 0, height_ = 0;
};

std::string num(double v) { return fixed(v, 1); }

std::string rect(double x0, double y, double w, double h, const std::string& fill, double opacity,
                 const std::string& title) {
  return "<rect x=\"" + num(x0) + "\" y=\"" + num(y) + "\" width=\"" + num(std::max(w, 1.0)) + "\" height=\"" +
         num(h) + "\" fill=\"" + fill + "\" fill-opacity=\"" + fixed(opacity, 2) + "\"><title>" + esc(title) +
         "</title></rect>\n";
}

std::string tick(double x0, double y, double h, const std::string& colour, const std::string& title) {
  return "<line x1=\"" + num(x0) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x0) + "\" y2=\"" + num(y + h) +
         "\" stroke=\"" + colour + "\" stroke-width=\"2\"><title>" + esc(title) + "</title></line>\n";
}

std::string marker(double x0, double y, const std::string& shape_colour, const std::string& title, bool diamond) {
  if (diamond)
    return "<path d=\"M" + num(x0) + " " + num(y - 4) + " l4 4 l-4 4 l-4 -4 z\" fill=\"" + shape_colour +
           "\"><title>" + esc(title) + "</title></path>\n";
  return "<circle cx=\"" + num(x0) + "\" cy=\"" + num(y) + "\" r=\"3.5\" fill=\"" + shape_colour + "\"><title>" +
         esc(title) + "</title></circle>\n";
}

std::string timeline_svg(const RunReport& r, const std::vector<Event>& events) {
  const Findings& f = r.findings;
  std::set<std::string, decltype(&lane_less)> procs(&lane_less);
  for (const Hold& h : f.holds) procs.insert(h.proc);
  for (const Event& e : events)
    if (!e.proc.empty() && e.proc[0] == 'w') procs.insert(e.proc);
  for (const FaultWindow& w : f.faults)
    if (!w.target.empty() && w.target[0] == 'w') procs.insert(w.target);
  std::map<std::string, std::size_t> lane;
  for (const auto& p : procs) lane.emplace(p, lane.size());
  std::unordered_map<std::string, const Hold*> by_grant;
  for (const Hold& h : f.holds) by_grant.emplace(h.grant, &h);

  std::int64_t start = r.info.run_start_t, end = r.info.run_end_t;
  if (start == 0 && !events.empty()) start = events.front().t;
  if (end <= start && !events.empty()) end = events.back().t;
  const Svg svg(start, end, std::max<std::size_t>(lane.size(), 1));
  const double lane_h = Svg::kLane - 6;
  auto rel = [&](std::int64_t t) { return secs(t, r.info) + " s"; };
  auto lane_of_grant = [&](const std::string& g) -> std::optional<std::size_t> {
    auto h = by_grant.find(g);
    if (h == by_grant.end()) return std::nullopt;
    return lane.at(h->second->proc);
  };

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(svg.width()) << "\" height=\""
    << num(svg.height()) << "\" font-family=\"monospace\" font-size=\"11\">\n";
  // Axis: a grid line every `step` seconds.
  const double total_s = static_cast<double>(end - start) / 1e9;
  double step = 1;
  while (total_s / step > 40) step *= (step == 1 || step == 10 || step == 100) ? 5 : 2;
  for (double s = 0; s <= total_s + 1e-9; s += step) {
    const double gx = svg.x(start + static_cast<std::int64_t>(s * 1e9));
    o << "<line x1=\"" << num(gx) << "\" y1=\"" << num(Svg::kTop) << "\" x2=\"" << num(gx) << "\" y2=\""
      << num(svg.plot_bottom()) << "\" stroke=\"#e4e4e4\"/>\n<text x=\"" << num(gx) << "\" y=\""
      << num(svg.plot_bottom() + 14) << "\" text-anchor=\"middle\">" << fixed(s, 0) << "s</text>\n";
  }
  for (const auto& [p, i] : lane)
    o << "<text x=\"4\" y=\"" << num(Svg::lane_y(i) + lane_h / 2 + 4) << "\">" << esc(p) << "</text>\n";

  // Fault windows under everything else.
  for (const FaultWindow& w : f.faults) {
    const double x0 = svg.x(w.start_t), wd = svg.x(w.end_t) - x0;
    const std::string title = w.kind + " of " + w.target + " at " + rel(w.start_t) + ", " +
                              std::to_string(ms_of(w.end_t - w.start_t)) + " ms; proof: " + w.proof;
    auto it = lane.find(w.target);
    if (w.end_t == w.start_t && it != lane.end())  // kill, crash: an instant, drawn as a bold tick
      o << tick(x0, Svg::lane_y(it->second) - 3, Svg::kLane - 2, fault_colour(w.kind), title);
    else if (w.end_t == w.start_t)
      o << tick(x0, Svg::kTop - 4, svg.plot_bottom() - Svg::kTop + 4, fault_colour(w.kind), title);
    else if (it != lane.end())
      o << rect(x0, Svg::lane_y(it->second) - 2, wd, Svg::kLane - 2, fault_colour(w.kind), 0.3, title);
    else
      o << rect(x0, Svg::kTop - 4, wd, svg.plot_bottom() - Svg::kTop + 4, fault_colour(w.kind), 0.18, title);
  }
  for (const Overlap& ov : f.overlaps) {
    const std::string title = std::string(ov.explained ? "explained" : "UNEXPLAINED") + " overlap " +
                              ov.first_grant + " / " + ov.second_grant + " at " + rel(ov.start_t) + ", " +
                              std::to_string(ms_of(ov.end_t - ov.start_t)) + " ms" +
                              (ov.explained ? ": " + ov.explanation : "");
    o << rect(svg.x(ov.start_t), Svg::kTop - 4, svg.x(ov.end_t) - svg.x(ov.start_t),
              svg.plot_bottom() - Svg::kTop + 4, ov.explained ? "#ff8080" : "#ff0000", ov.explained ? 0.25 : 0.45,
              title);
  }
  for (const Hold& h : f.holds) {
    const std::string title = h.grant + " fence " + std::to_string(h.fence) + ": " + rel(h.ok_t) + " to " +
                              rel(h.end_t) + " (" + h.end_reason +
                              (h.release_phase.empty() ? "" : ", release " + h.release_phase) + ")";
    o << rect(svg.x(h.ok_t), Svg::lane_y(lane.at(h.proc)), svg.x(h.end_t) - svg.x(h.ok_t), lane_h,
              grant_colour(h.grant), 0.85, title);
  }
  for (const Event& e : events) {
    auto it = lane.find(e.proc);
    if (it == lane.end()) continue;
    const double y = Svg::lane_y(it->second);
    if (e.op == "lost")
      o << marker(svg.x(e.t), y + lane_h / 2, "#202020", "lost notification of " + e.grant + " at " + rel(e.t),
                  false);
    else if (e.op == "failpoint")
      o << marker(svg.x(e.t), y + lane_h / 2, "#8000a0",
                  "failpoint " + e.kind + " (" + e.detail + ") at " + rel(e.t), true);
  }
  for (const StaleWrite& w : f.stale_writes)
    if (auto l = lane_of_grant(w.stale_grant))
      o << tick(svg.x(w.t), Svg::lane_y(*l) - 3, Svg::kLane - 2, "#ff0000",
                "stale " + w.op + " by " + w.stale_grant + " (seq " + std::to_string(w.stale_seq) + ") after " +
                    w.newer_grant + " (seq " + std::to_string(w.newer_seq) + ") at " + rel(w.t));
  for (const ForeignRelease& x : f.foreign_releases)
    if (auto l = lane_of_grant(x.releaser_grant))
      o << tick(svg.x(x.t), Svg::lane_y(*l) - 3, Svg::kLane - 2, "#c00000",
                "foreign release by " + x.releaser_grant + " of " + x.victim_grant + "'s lock at " + rel(x.t));
  o << "</svg>\n";
  return o.str();
}

std::string legend(const Findings& f) {
  std::set<std::string> kinds;
  for (const FaultWindow& w : f.faults) kinds.insert(w.kind);
  std::string out = "<div class=\"legend\">";
  auto item = [&out](const std::string& colour, const std::string& label) {
    out += "<span><i style=\"background:" + colour + "\"></i>" + esc(label) + "</span>";
  };
  item("hsl(200,55%,50%)", "hold (colour by grant; hover for fence)");
  item("#ff0000", "unexplained overlap / stale write / foreign release");
  item("#ff8080", "explained overlap");
  item("#202020", "lost notification (dot)");
  item("#8000a0", "failpoint (diamond)");
  for (const auto& k : kinds) item(fault_colour(k), "fault: " + k);
  return out + "</div>\n";
}

}  // namespace

std::string render_text(const RunReport& r) {
  return "dlock-torture: " + r.info.scenario + " / " + r.info.strategy + "\n\n" + text_setup(r) + "\n" +
         text_operations(r) + "\n" + text_faults(r) + "\n" + text_violations(r) + "\n" + text_lost_updates(r) + "\n" +
         text_recovery(r) + "\n" + text_verdict(r);
}

std::string render_json(const RunReport& r) { return dump(run_json(r)); }

std::string render_html(const RunReport& r, const std::vector<Event>& events) {
  const std::string title = "dlock-torture: " + r.info.scenario + " / " + r.info.strategy;
  std::string out =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + esc(title) +
      "</title>\n<style>body{font-family:sans-serif;margin:16px}pre{background:#f6f6f6;padding:8px}"
      ".pass{color:#070}.fail{color:#b00}.timeline{overflow-x:auto;border:1px solid #ccc}"
      ".legend span{margin-right:14px;white-space:nowrap}.legend i{display:inline-block;width:12px;height:12px;"
      "margin-right:4px;vertical-align:middle;opacity:.7}</style></head>\n<body>\n<h1>" +
      esc(title) + "</h1>\n";
  out += "<h2 class=\"" + std::string(r.verdict.pass ? "pass" : "fail") + "\">" + verdict_word(r.verdict) +
         (r.verdict.caught ? " &mdash; violations found" : " &mdash; no violations found") + "</h2>\n<ul>\n";
  for (const auto& v : r.verdict.violations) out += "<li>violation: " + esc(v) + "</li>\n";
  for (const auto& p : r.verdict.problems) out += "<li>problem: " + esc(p) + "</li>\n";
  out += "</ul>\n<h2>Timeline</h2>\n" + legend(r.findings) + "<div class=\"timeline\">\n" +
         timeline_svg(r, events) + "</div>\n<h2>Findings</h2>\n<pre>" + esc(render_text(r)) +
         "</pre>\n</body></html>\n";
  return out;
}

std::string render_suite_text(const std::vector<RunReport>& runs) {
  Table t({2, 3, 4, 5, 6, 7, 8, 9});
  t.add({"scenario", "strategy", "grants", "faults", "overlaps e/u", "stale f/u", "lost upd", "fence anom",
         "foreign", "recovery max ms", "verdict"});
  std::int64_t ops = 0;
  std::size_t passed = 0;
  for (const RunReport& r : runs) {
    const Findings& f = r.findings;
    const std::int64_t rec = recovery_max_ms(f);
    t.add({r.info.scenario, r.info.strategy, std::to_string(f.grants), std::to_string(f.faults.size()),
           std::to_string(explained_overlaps(f)) + "/" + std::to_string(f.unexplained_overlaps),
           std::to_string(f.stale_fenced) + "/" + std::to_string(f.stale_unfenced), std::to_string(f.lost_updates),
           std::to_string(f.fence_anomaly_count), std::to_string(f.foreign_releases.size()),
           rec >= 0 ? std::to_string(rec) : "-",
           verdict_word(r.verdict) + (r.expect.must_be_caught ? (r.verdict.caught ? " (caught)" : " (missed)") : "")});
    ops += f.model.ops_judged;
    if (r.verdict.pass) ++passed;
  }
  return t.render("") + "\n" + std::to_string(passed) + " of " + std::to_string(runs.size()) +
         " runs met their expectation; " + std::to_string(ops) + " lock operations judged\n";
}

std::string render_suite_json(const std::vector<RunReport>& runs) {
  json list = json::array();
  std::size_t passed = 0;
  for (const RunReport& r : runs) {
    list.push_back(run_json(r));
    if (r.verdict.pass) ++passed;
  }
  return dump({{"runs", list}, {"total", runs.size()}, {"passed", passed}});
}

}  // namespace torture

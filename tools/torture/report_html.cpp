// The HTML report: verdict, findings and an SVG timeline of every hold,
// fault and violation.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "report.hpp"
#include "report_format.hpp"

namespace torture {
namespace {

// ---------------------------------------------------------------------------
// HTML timeline.

std::string esc(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
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
      {"pause", "#f0a020"},        {"failpoint-pause", "#e07020"},
      {"late-reply", "#c060c0"},   {"kill", "#000000"},
      {"crash", "#000000"},        {"restart", "#6060e0"},
      {"client-clock", "#20a0a0"}, {"server-clock", "#2080c0"},
      {"partition", "#808080"},    {"delay", "#a0a040"},
      {"drop", "#a06040"},         {"reset", "#a04060"},
      {"client-pause", "#d0b000"}, {"debug-sleep", "#60a060"}};
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
  return "<rect x=\"" + num(x0) + "\" y=\"" + num(y) + "\" width=\"" + num(std::max(w, 1.0)) + "\" height=\"" + num(h) +
         "\" fill=\"" + fill + "\" fill-opacity=\"" + fixed(opacity, 2) + "\"><title>" + esc(title) +
         "</title></rect>\n";
}

std::string tick(double x0, double y, double h, const std::string& colour, const std::string& title) {
  return "<line x1=\"" + num(x0) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x0) + "\" y2=\"" + num(y + h) +
         "\" stroke=\"" + colour + "\" stroke-width=\"2\"><title>" + esc(title) + "</title></line>\n";
}

std::string marker(double x0, double y, const std::string& shape_colour, const std::string& title, bool diamond) {
  if (diamond)
    return "<path d=\"M" + num(x0) + " " + num(y - 4) + " l4 4 l-4 4 l-4 -4 z\" fill=\"" + shape_colour + "\"><title>" +
           esc(title) + "</title></path>\n";
  return "<circle cx=\"" + num(x0) + "\" cy=\"" + num(y) + "\" r=\"3.5\" fill=\"" + shape_colour + "\"><title>" +
         esc(title) + "</title></circle>\n";
}

constexpr double kBar = Svg::kLane - 6;  // a hold's bar in its lane

// A lane for every worker that held, logged or was hit by a fault, in
// natural order.
std::map<std::string, std::size_t> worker_lanes(const Findings& f, const std::vector<Event>& events) {
  std::set<std::string, decltype(&lane_less)> procs(&lane_less);
  for (const Hold& h : f.holds) procs.insert(h.proc);
  for (const Event& e : events)
    if (!e.proc.empty() && e.proc[0] == 'w') procs.insert(e.proc);
  for (const FaultWindow& w : f.faults)
    if (!w.target.empty() && w.target[0] == 'w') procs.insert(w.target);
  std::map<std::string, std::size_t> lane;
  for (const auto& p : procs) lane.emplace(p, lane.size());
  return lane;
}

// What every layer of the timeline draws with: the run, a lane per worker,
// each grant's hold, the run's span and its scale.
struct Canvas {
  const RunReport& r;
  std::map<std::string, std::size_t> lane;
  std::unordered_map<std::string, const Hold*> by_grant;
  std::int64_t start, end;
  Svg svg;

  std::string rel(std::int64_t t) const { return secs(t, r.info) + " s"; }
  std::optional<std::size_t> lane_of_grant(const std::string& g) const {
    auto h = by_grant.find(g);
    if (h == by_grant.end()) return std::nullopt;
    return lane.at(h->second->proc);
  }
};

Canvas make_canvas(const RunReport& r, const std::vector<Event>& events) {
  auto lane = worker_lanes(r.findings, events);
  std::unordered_map<std::string, const Hold*> by_grant;
  for (const Hold& h : r.findings.holds) by_grant.emplace(h.grant, &h);
  // The run's span; from the events when the run did not record it.
  std::int64_t start = r.info.run_start_t, end = r.info.run_end_t;
  if (start == 0 && !events.empty()) start = events.front().t;
  if (end <= start && !events.empty()) end = events.back().t;
  const std::size_t lanes = std::max<std::size_t>(lane.size(), 1);
  return Canvas{r, std::move(lane), std::move(by_grant), start, end, Svg(start, end, lanes)};
}

// A grid line every `step` seconds, and the lanes' names.
void draw_axis(const Canvas& c, std::ostringstream& o) {
  const Svg& svg = c.svg;
  const double total_s = static_cast<double>(c.end - c.start) / 1e9;
  double step = 1;
  while (total_s / step > 40) step *= (step == 1 || step == 10 || step == 100) ? 5 : 2;
  for (double s = 0; s <= total_s + 1e-9; s += step) {
    const double gx = svg.x(c.start + static_cast<std::int64_t>(s * 1e9));
    o << "<line x1=\"" << num(gx) << "\" y1=\"" << num(Svg::kTop) << "\" x2=\"" << num(gx) << "\" y2=\""
      << num(svg.plot_bottom()) << "\" stroke=\"#e4e4e4\"/>\n<text x=\"" << num(gx) << "\" y=\""
      << num(svg.plot_bottom() + 14) << "\" text-anchor=\"middle\">" << fixed(s, 0) << "s</text>\n";
  }
  for (const auto& [p, i] : c.lane)
    o << "<text x=\"4\" y=\"" << num(Svg::lane_y(i) + kBar / 2 + 4) << "\">" << esc(p) << "</text>\n";
}

// Fault windows: in their target's lane, or across every lane; an instant
// (kill, crash) as a bold tick.
void draw_faults(const Canvas& c, std::ostringstream& o) {
  const Svg& svg = c.svg;
  for (const FaultWindow& w : c.r.findings.faults) {
    const double x0 = svg.x(w.start_t), wd = svg.x(w.end_t) - x0;
    const std::string title = w.kind + " of " + w.target + " at " + c.rel(w.start_t) + ", " +
                              std::to_string(ms_of(w.end_t - w.start_t)) + " ms; proof: " + w.proof;
    auto it = c.lane.find(w.target);
    if (w.end_t == w.start_t && it != c.lane.end())
      o << tick(x0, Svg::lane_y(it->second) - 3, Svg::kLane - 2, fault_colour(w.kind), title);
    else if (w.end_t == w.start_t)
      o << tick(x0, Svg::kTop - 4, svg.plot_bottom() - Svg::kTop + 4, fault_colour(w.kind), title);
    else if (it != c.lane.end())
      o << rect(x0, Svg::lane_y(it->second) - 2, wd, Svg::kLane - 2, fault_colour(w.kind), 0.3, title);
    else
      o << rect(x0, Svg::kTop - 4, wd, svg.plot_bottom() - Svg::kTop + 4, fault_colour(w.kind), 0.18, title);
  }
}

// Overlaps across every lane, then each hold as a bar in its lane.
void draw_holds(const Canvas& c, std::ostringstream& o) {
  const Svg& svg = c.svg;
  const Findings& f = c.r.findings;
  for (const Overlap& ov : f.overlaps) {
    const std::string title = std::string(ov.explained ? "explained" : "UNEXPLAINED") + " overlap " + ov.first_grant +
                              " / " + ov.second_grant + " at " + c.rel(ov.start_t) + ", " +
                              std::to_string(ms_of(ov.end_t - ov.start_t)) + " ms" +
                              (ov.explained ? ": " + ov.explanation : "");
    o << rect(svg.x(ov.start_t), Svg::kTop - 4, svg.x(ov.end_t) - svg.x(ov.start_t), svg.plot_bottom() - Svg::kTop + 4,
              ov.explained ? "#ff8080" : "#ff0000", ov.explained ? 0.25 : 0.45, title);
  }
  for (const Hold& h : f.holds) {
    const std::string title = h.grant + " fence " + std::to_string(h.fence) + ": " + c.rel(h.ok_t) + " to " +
                              c.rel(h.end_t) + " (" + h.end_reason +
                              (h.release_phase.empty() ? "" : ", release " + h.release_phase) + ")";
    o << rect(svg.x(h.ok_t), Svg::lane_y(c.lane.at(h.proc)), svg.x(h.end_t) - svg.x(h.ok_t), kBar,
              grant_colour(h.grant), 0.85, title);
  }
}

// Lost notifications (dots) and failpoints (diamonds) on their worker's lane.
void draw_worker_events(const Canvas& c, const std::vector<Event>& events, std::ostringstream& o) {
  const Svg& svg = c.svg;
  for (const Event& e : events) {
    auto it = c.lane.find(e.proc);
    if (it == c.lane.end()) continue;
    const double y = Svg::lane_y(it->second);
    if (e.op == "lost")
      o << marker(svg.x(e.t), y + kBar / 2, "#202020", "lost notification of " + e.grant + " at " + c.rel(e.t), false);
    else if (e.op == "failpoint")
      o << marker(svg.x(e.t), y + kBar / 2, "#8000a0", "failpoint " + e.kind + " (" + e.detail + ") at " + c.rel(e.t),
                  true);
  }
}

// Stale writes and foreign releases as red ticks on the culprit's lane.
void draw_late_holders(const Canvas& c, std::ostringstream& o) {
  const Svg& svg = c.svg;
  const Findings& f = c.r.findings;
  for (const StaleWrite& w : f.stale_writes)
    if (auto l = c.lane_of_grant(w.stale_grant))
      o << tick(svg.x(w.t), Svg::lane_y(*l) - 3, Svg::kLane - 2, "#ff0000",
                "stale " + w.op + " by " + w.stale_grant + " (seq " + std::to_string(w.stale_seq) + ") after " +
                    w.newer_grant + " (seq " + std::to_string(w.newer_seq) + ") at " + c.rel(w.t));
  for (const ForeignRelease& x : f.foreign_releases)
    if (auto l = c.lane_of_grant(x.releaser_grant))
      o << tick(svg.x(x.t), Svg::lane_y(*l) - 3, Svg::kLane - 2, "#c00000",
                "foreign release by " + x.releaser_grant + " of " + x.victim_grant + "'s lock at " + c.rel(x.t));
}

// Drawn in layers, each over the one before: axis, faults, holds, events,
// violations.
std::string timeline_svg(const RunReport& r, const std::vector<Event>& events) {
  const Canvas c = make_canvas(r, events);
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(c.svg.width()) << "\" height=\""
    << num(c.svg.height()) << "\" font-family=\"monospace\" font-size=\"11\">\n";
  draw_axis(c, o);
  draw_faults(c, o);
  draw_holds(c, o);
  draw_worker_events(c, events, o);
  draw_late_holders(c, o);
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

std::string render_html(const RunReport& r, const std::vector<Event>& events) {
  const std::string title = "dlock-torture: " + r.info.scenario + " / " + r.info.strategy;
  std::string out =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + esc(title) +
      "</title>\n<style>body{font-family:sans-serif;margin:16px}pre{background:#f6f6f6;padding:8px}"
      ".pass{color:#070}.fail{color:#b00}.timeline{overflow-x:auto;border:1px solid #ccc}"
      ".legend span{margin-right:14px;white-space:nowrap}.legend i{display:inline-block;width:12px;height:12px;"
      "margin-right:4px;vertical-align:middle;opacity:.7}</style></head>\n<body>\n<h1>" +
      esc(title) + "</h1>\n";
  out += "<h2 class=\"" + std::string(r.verdict.pass ? "pass" : "fail") + "\">" + esc(verdict_headline(r)) +
         "</h2>\n<ul>\n";
  for (const auto& v : r.verdict.violations) out += "<li>violation: " + esc(v) + "</li>\n";
  for (const auto& p : r.verdict.problems) out += "<li>problem: " + esc(p) + "</li>\n";
  out += "</ul>\n<h2>Timeline</h2>\n" + legend(r.findings) + "<div class=\"timeline\">\n" + timeline_svg(r, events) +
         "</div>\n<h2>Findings</h2>\n<pre>" + esc(render_text(r)) + "</pre>\n</body></html>\n";
  return out;
}

}  // namespace torture

// The report a person reads: one run as text, and the suite as one table.
// The JSON is report_json.cpp's, the HTML page report_html.cpp's.
#include "report.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "report_format.hpp"

namespace torture {
namespace {

constexpr std::size_t kTextRows = 20;  // rows of one finding list shown in text

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

// ", 2 fenced (the second grant's fence larger)" when any overlap had fences.
std::string fenced_overlaps(const Findings& f) {
  std::int64_t fenced = 0, with_fences = 0;
  for (const Overlap& o : f.overlaps) {
    if (o.first_fence != 0 && o.second_fence != 0) ++with_fences;
    if (o.fenced()) ++fenced;
  }
  if (with_fences == 0) return {};
  return ", " + std::to_string(fenced) + " of " + std::to_string(with_fences) +
         " fenced (the second grant's fence larger: the register refuses the first holder once the second wrote)";
}

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
  s.add({"acquire latency", "p50 " + std::to_string(f.acquire_p50_ms) + " ms, p99 " + std::to_string(f.acquire_p99_ms) +
                                " ms, max " + std::to_string(f.acquire_max_ms) + " ms"});
  s.add({"max unavailable", std::to_string(f.max_unavailable_ms) + " ms (no holder while an acquire waited)"});
  s.add({"losses notified", std::to_string(f.losses_notified) + " (" + std::to_string(f.losses_told_first) +
                                " holds told before the next grant, " + std::to_string(f.losses_told_late) +
                                " after it)"});
  if (f.wakeups >= 0)
    s.add({"wake-ups", std::to_string(f.wakeups) + " waiters woken by releases, " + fixed(f.wakeups_per_release, 2) +
                           " per release (1: no herd)"});
  s.add({"waited through", std::to_string(f.waited_through_max) + " grants to others at most during one acquire; " +
                               std::to_string(f.starved) + " workers asked and were never granted"});
  s.add({"fenced register",
         "accepted " + std::to_string(f.fenced_accepted) + ", rejected " + std::to_string(f.fenced_rejected)});
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
                         std::to_string(f.overlap_total_ms) + " ms, max " + std::to_string(f.overlap_max_ms) + " ms" +
                         fenced_overlaps(f)});
  s.add({"mutex model", f.model.verdict + (f.model.detail.empty() ? "" : ": " + f.model.detail)});
  s.add({"stale writes", "fenced " + std::to_string(f.stale_fenced) + ", unfenced " + std::to_string(f.stale_unfenced) +
                             " (accepted after a newer grant's write)"});
  s.add({"fence anomalies", std::to_string(f.fence_anomaly_count)});
  s.add({"foreign releases", std::to_string(f.foreign_releases.size())});
  out += s.render("  ");
  if (!f.overlaps.empty()) {
    Table t({2, 3});
    t.add({"first", "second", "start s", "ms", "fences", "explained by"});
    std::size_t n = 0;
    for (; n < f.overlaps.size() && n < kTextRows; ++n) {
      const Overlap& o = f.overlaps[n];
      // Whether the register can tell the two apart: the second's fence larger.
      const std::string fences = o.first_fence == 0 || o.second_fence == 0 ? "none"
                                 : o.fenced()                              ? "second larger"
                                                                           : "SECOND NOT LARGER";
      t.add({o.first_grant, o.second_grant, secs(o.start_t, r.info), std::to_string(ms_of(o.end_t - o.start_t)), fences,
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
    out += "\n  foreign releases\n" + t.render("    ") + more(n, static_cast<std::int64_t>(f.foreign_releases.size()));
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

// The recipe's own checks (recipe_check.hpp); empty for a plain mutex.
std::string text_recipe(const RunReport& r) {
  const RecipeFindings& x = r.findings.recipe;
  if (x.recipe.empty()) return {};
  std::string out = "RECIPE (" + x.recipe + ")\n";
  Table s;
  if (x.line_join_bound_ms > 0)
    s.add({"line order",
           std::to_string(x.line_pairs_judged) + " (waiter in line, later arrival granted) pairs judged, " +
               "join bound " + std::to_string(x.line_join_bound_ms) + " ms; overtaken " +
               std::to_string(x.line_overtakes) + ", excused by faults " + std::to_string(x.line_overtakes_excused)});
  if (x.recipe == "rw")
    s.add({"readers", std::to_string(x.shared_grants) + " reads, " + std::to_string(x.exclusive_grants) +
                          " writes; readers held at once " + std::to_string(x.reader_overlaps) + " times, at most " +
                          std::to_string(x.reader_overlap_max) + " together"});
  if (x.recipe == "semaphore") {
    s.add({"permits", std::to_string(x.permits) + "; at most " + std::to_string(x.max_holders) +
                          " holders at once; intervals over N: unexplained " + std::to_string(x.excess_unexplained) +
                          ", explained " + std::to_string(x.excess_explained)});
    std::string rec;
    for (const PermitRecovery& p : x.permit_recoveries)
      rec += (rec.empty() ? "" : ", ") + (p.recovery_ms >= 0 ? std::to_string(p.recovery_ms) + " ms" : "never") + " (" +
             p.cause + ")";
    s.add({"lost permits", std::to_string(x.permit_recoveries.size()) + (rec.empty() ? "" : ": " + rec)});
  }
  if (x.recipe == "election") {
    s.add({"terms", std::to_string(x.terms) + " granted, " + std::to_string(x.term_clashes) + " with two leaders"});
    s.add({"deposed writes", std::to_string(x.deposed_writes) + " of " + std::to_string(x.leader_writes) +
                                 " leader writes: rejected " + std::to_string(x.deposed_rejected) +
                                 ", accepted before the successor wrote " + std::to_string(x.deposed_accepted) +
                                 ", unknown " + std::to_string(x.deposed_unknown)});
  }
  out += s.render("  ");
  if (!x.overtakes.empty()) {
    Table t;
    t.add(
        {"waiter", "overtaken by", "waiter began s", "other began s", "other granted s", "waiter's end", "excused by"});
    std::size_t n = 0;
    for (; n < x.overtakes.size() && n < kTextRows; ++n) {
      const LineOvertake& o = x.overtakes[n];
      t.add({o.waiter, o.overtaker, secs(o.waiter_invoke_t, r.info), secs(o.overtaker_invoke_t, r.info),
             secs(o.overtaker_ok_t, r.info), o.waiter_outcome + " at " + secs(o.waiter_end_t, r.info) + " s",
             o.excused ? o.excuse : "NOT EXCUSED"});
    }
    out += "\n  overtakes\n" + t.render("    ") + more(n, x.line_overtakes + x.line_overtakes_excused);
  }
  if (!x.excesses.empty()) {
    Table t({1, 2});
    t.add({"start s", "ms", "holders", "grants", "explained by"});
    std::size_t n = 0;
    for (; n < x.excesses.size() && n < kTextRows; ++n) {
      const CapacityExcess& e = x.excesses[n];
      std::string g;
      for (const auto& s2 : e.grants) g += (g.empty() ? "" : " ") + s2;
      t.add({secs(e.start_t, r.info), std::to_string(ms_of(e.end_t - e.start_t)), std::to_string(e.holders), g,
             e.explained ? e.explanation : "UNEXPLAINED"});
    }
    out += "\n  more holders than permits\n" + t.render("    ") + more(n, x.excess_unexplained + x.excess_explained);
  }
  for (const auto& c : x.clashes) out += "  two leaders: " + c + "\n";
  return out + "\n";
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
  std::string out = "EXPECTATION\n" + t.render("  ") + "\nVERDICT  " + verdict_headline(r) + "\n" +
                    (r.verdict.pass ? "  the run met its expectation" : "  the run did not meet its expectation") +
                    "; caught: " + (r.verdict.caught ? "yes" : "no") + "\n";
  for (const auto& v : r.verdict.violations) out += "  violation: " + v + "\n";
  for (const auto& p : r.verdict.problems) out += "  problem:   " + p + "\n";
  return out;
}

}  // namespace

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string verdict_word(const Verdict& v) { return v.pass ? "PASS" : "FAIL"; }

std::string verdict_headline(const RunReport& r) {
  const Verdict& v = r.verdict;
  const Findings& f = r.findings;
  const std::string word = verdict_word(v);
  if (!v.pass) return word + ": " + (v.problems.empty() ? "the run did not meet its expectation" : v.problems.front());
  auto joined = [](const std::vector<std::string>& parts) {
    std::string out;
    for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
    return out;
  };
  if (r.expect.must_be_caught) return word + ": the control was caught (" + joined(v.violations) + ")";
  if (!v.caught)
    return word + ": no violations found in " + std::to_string(f.model.ops_judged) + " lock operations under " +
           std::to_string(f.faults.size()) + " faults";
  // Caught, yet a pass: only what the expectation allows was found.
  std::vector<std::string> parts;
  if (!f.overlaps.empty() && f.unexplained_overlaps == 0) {
    std::map<std::string, int> kinds;  // "pause of w2 (3012 ms) ..." -> "pause"
    for (const auto& o : f.overlaps) ++kinds[o.explanation.substr(0, o.explanation.find(" of "))];
    std::string why;
    for (const auto& [kind, n] : kinds) why += (why.empty() ? "" : ", ") + kind + " x" + std::to_string(n);
    parts.push_back(std::to_string(f.overlaps.size()) + (f.overlaps.size() == 1 ? " overlap" : " overlaps") +
                    ", all explained (" + why + ")");
  }
  for (const auto& violation : v.violations)
    if (violation.find("overlap") == std::string::npos) parts.push_back(violation + ", allowed by the expectation");
  return word + ": " + (parts.empty() ? joined(v.violations) + ", allowed by the expectation" : joined(parts));
}

std::string secs(std::int64_t t, const RunInfo& info) {
  return fixed(static_cast<double>(t - info.run_start_t) / 1e9, 3);
}

std::int64_t ms_of(std::int64_t ns) { return (ns + 500'000) / 1'000'000; }

std::int64_t recovery_max_ms(const Findings& f) {
  std::int64_t m = -1;
  for (const Recovery& r : f.recoveries) m = std::max(m, r.recovery_ms);
  return m;
}

std::int64_t explained_overlaps(const Findings& f) {
  return static_cast<std::int64_t>(f.overlaps.size()) - f.unexplained_overlaps;
}

std::string render_text(const RunReport& r) {
  return "dlock-torture: " + r.info.scenario + " / " + r.info.strategy + "\n\n" + text_setup(r) + "\n" +
         text_operations(r) + "\n" + text_faults(r) + "\n" + text_violations(r) + "\n" + text_lost_updates(r) + "\n" +
         text_recovery(r) + "\n" + text_recipe(r) + text_verdict(r);
}

std::string render_suite_text(const std::vector<RunReport>& runs) {
  Table t({2, 3, 4, 5, 6, 7, 8, 9});
  t.add({"scenario", "strategy", "grants", "faults", "overlaps e/u", "stale f/u", "lost upd", "fence anom", "foreign",
         "recovery max ms", "verdict"});
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

}  // namespace torture

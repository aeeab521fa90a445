// The machine-readable report: one JSON object per run, and the suite's list
// of them.
#include <nlohmann/json.hpp>

#include "report.hpp"
#include "report_format.hpp"

namespace torture {
namespace {

using nlohmann::json;

// Seconds since the run's start.
double at_s(std::int64_t t, const RunInfo& info) { return static_cast<double>(t - info.run_start_t) / 1e9; }

// Operations by outcome, and the liveness figures drawn from them.
void add_operations(const Findings& f, json& j) {
  json ops = json::object();
  for (const auto& [op, c] : f.ops) ops[op] = {{"invoke", c.invoke}, {"ok", c.ok}, {"fail", c.fail}, {"info", c.info}};
  j["operations"] = ops;
  j["grants"] = f.grants;
  j["grants_per_s"] = f.grants_per_s;
  j["acquire_ms"] = {{"p50", f.acquire_p50_ms}, {"p99", f.acquire_p99_ms}, {"max", f.acquire_max_ms}};
  j["max_unavailable_ms"] = f.max_unavailable_ms;
  j["losses_notified"] = f.losses_notified;
  j["losses_told"] = {{"before_next_grant", f.losses_told_first}, {"after_next_grant", f.losses_told_late}};
  if (f.wakeups >= 0) j["wakeups"] = {{"total", f.wakeups}, {"per_release", f.wakeups_per_release}};
  j["waited_through_max"] = f.waited_through_max;
  j["starved"] = f.starved;
  j["fenced_register"] = {{"accepted", f.fenced_accepted}, {"rejected", f.fenced_rejected}};
}

json faults_json(const RunReport& r) {
  json faults = json::array();
  for (const FaultWindow& w : r.findings.faults)
    faults.push_back({{"kind", w.kind},
                      {"target", w.target},
                      {"start_s", at_s(w.start_t, r.info)},
                      {"duration_ms", ms_of(w.end_t - w.start_t)},
                      {"proof", w.proof}});
  return faults;
}

json overlaps_json(const RunReport& r) {
  const Findings& f = r.findings;
  json overlaps = json::array();
  for (std::size_t i = 0; i < f.overlaps.size() && i < kMaxListed; ++i) {
    const Overlap& o = f.overlaps[i];
    overlaps.push_back({{"first", o.first_grant},
                        {"second", o.second_grant},
                        {"start_s", at_s(o.start_t, r.info)},
                        {"ms", ms_of(o.end_t - o.start_t)},
                        {"explained", o.explained},
                        {"explanation", o.explanation},
                        {"first_fence", o.first_fence},
                        {"second_fence", o.second_fence}});
  }
  return {{"total", f.overlaps.size()},         {"unexplained", f.unexplained_overlaps},
          {"explained", explained_overlaps(f)}, {"total_ms", f.overlap_total_ms},
          {"max_ms", f.overlap_max_ms},         {"list", overlaps}};
}

// Stale writes, fence anomalies and foreign releases: what a holder that
// lost the lock did after another was granted it.
void add_late_holders(const Findings& f, json& j) {
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
}

json recovery_json(const RunReport& r) {
  const Findings& f = r.findings;
  json rec = json::array();
  for (const Recovery& x : f.recoveries)
    rec.push_back({{"dead_grant", x.dead_grant},
                   {"death_s", at_s(x.death_t, r.info)},
                   {"recovery_ms", x.next_grant_t ? json(x.recovery_ms) : json(nullptr)},
                   {"within_bound", x.within_bound}});
  return {{"bound_ms", r.info.ttl_ms + r.info.recovery_slack_ms},
          {"max_ms", recovery_max_ms(f)},
          {"lockouts", f.lockouts},
          {"list", rec}};
}

json line_order_json(const RunReport& r) {
  const RecipeFindings& x = r.findings.recipe;
  json list = json::array();
  for (const LineOvertake& o : x.overtakes)
    list.push_back({{"waiter", o.waiter},
                    {"overtaker", o.overtaker},
                    {"waiter_began_s", at_s(o.waiter_invoke_t, r.info)},
                    {"overtaker_granted_s", at_s(o.overtaker_ok_t, r.info)},
                    {"waiter_outcome", o.waiter_outcome},
                    {"excused", o.excused},
                    {"excuse", o.excuse}});
  return {{"join_bound_ms", x.line_join_bound_ms},
          {"pairs_judged", x.line_pairs_judged},
          {"overtaken", x.line_overtakes},
          {"excused", x.line_overtakes_excused},
          {"list", list}};
}

json permits_json(const RunReport& r) {
  const RecipeFindings& x = r.findings.recipe;
  json ex = json::array();
  for (const CapacityExcess& e : x.excesses)
    ex.push_back({{"start_s", at_s(e.start_t, r.info)},
                  {"ms", ms_of(e.end_t - e.start_t)},
                  {"holders", e.holders},
                  {"grants", e.grants},
                  {"explained", e.explained},
                  {"explanation", e.explanation}});
  json rec = json::array();
  for (const PermitRecovery& p : x.permit_recoveries)
    rec.push_back({{"grant", p.grant},
                   {"cause", p.cause},
                   {"t_s", at_s(p.t, r.info)},
                   {"recovery_ms", p.recovery_ms >= 0 ? json(p.recovery_ms) : json(nullptr)}});
  return {{"n", x.permits},
          {"max_holders", x.max_holders},
          {"excess_unexplained", x.excess_unexplained},
          {"excess_explained", x.excess_explained},
          {"excesses", ex},
          {"lost_permits", rec}};
}

json recipe_json(const RunReport& r) {
  const RecipeFindings& x = r.findings.recipe;
  json j = {{"recipe", x.recipe}};
  if (x.line_join_bound_ms > 0) j["line_order"] = line_order_json(r);
  if (x.recipe == "rw")
    j["readers"] = {{"reads", x.shared_grants},
                    {"writes", x.exclusive_grants},
                    {"overlaps", x.reader_overlaps},
                    {"max_together", x.reader_overlap_max}};
  if (x.recipe == "semaphore") j["permits"] = permits_json(r);
  if (x.recipe == "election")
    j["election"] = {{"terms", x.terms},
                     {"term_clashes", x.term_clashes},
                     {"clashes", x.clashes},
                     {"leader_writes", x.leader_writes},
                     {"deposed_writes", x.deposed_writes},
                     {"deposed_rejected", x.deposed_rejected},
                     {"deposed_accepted", x.deposed_accepted},
                     {"deposed_unknown", x.deposed_unknown}};
  return j;
}

// The expectation and how the run met it.
void add_judgement(const RunReport& r, json& j) {
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
}

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
  add_operations(f, j);
  j["faults"] = faults_json(r);
  j["overlaps"] = overlaps_json(r);
  j["model"] = {{"verdict", f.model.verdict}, {"detail", f.model.detail}, {"ops_judged", f.model.ops_judged}};
  add_late_holders(f, j);
  j["lost_updates"] = {{"acked", f.counter_acked},
                       {"final", f.counter_final ? json(*f.counter_final) : json(nullptr)},
                       {"lost", f.lost_updates},
                       {"pct", f.lost_pct}};
  j["recovery"] = recovery_json(r);
  if (!f.recipe.recipe.empty()) j["recipe"] = recipe_json(r);
  add_judgement(r, j);
  return j;
}

std::string dump(const json& j) { return j.dump(2, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::string render_json(const RunReport& r) { return dump(run_json(r)); }

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

#include "recipe_check.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

namespace torture {
namespace {

// "w3": a worker's name; anything else ("server", "all", "node2",
// "server0", "nodes 3-4") is a fault of the servers or of everyone.
bool worker_name(const std::string& t) {
  if (t.size() < 2 || t[0] != 'w') return false;
  return std::all_of(t.begin() + 1, t.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Whether a fault aimed at `target` touches `proc`.
bool hits(const std::string& target, const std::string& proc) { return target == proc || !worker_name(target); }

std::string at_ms(std::int64_t t) { return std::to_string(to_ms(t)) + " ms"; }

}  // namespace

bool drops_from_line(const std::string& kind) {
  // A client's wall clock plays no part in the line (server time only).
  return kind != "client-clock";
}

void check_line_order(const Index& ix, const std::vector<FaultWindow>& faults, std::int64_t join_bound_ns,
                      std::int64_t recovery_ns, std::int64_t run_end, RecipeFindings& r) {
  r.line_join_bound_ms = to_ms(join_bound_ns);
  // Each incarnation's acquires are sequential: in invoke order per process.
  std::map<std::pair<std::string, int>, std::vector<const AcquireRec*>> by_proc;
  for (const AcquireRec& a : ix.acquires) by_proc[{a.proc, a.inc}].push_back(&a);
  auto end_of = [&](const AcquireRec& a) {
    if (a.done_t != kNever) return a.done_t;
    return std::min(death_after(ix, a.proc, a.inc, a.invoke_t), run_end);
  };
  // When the server answered anyone: grants and releases that succeeded.
  std::vector<std::int64_t> answers;
  for (const AcquireRec& a : ix.acquires)
    if (a.phase == "ok") answers.push_back(a.done_t);
  for (const auto& [grant, rel] : ix.releases)
    if (rel.phase == "ok") answers.push_back(rel.done_t);
  std::sort(answers.begin(), answers.end());
  auto serving = [&](std::int64_t from, std::int64_t to) {
    auto it = std::lower_bound(answers.begin(), answers.end(), from);
    return it != answers.end() && *it <= to;
  };
  std::vector<LineOvertake> excused;
  for (const AcquireRec& b : ix.acquires) {
    if (b.phase != "ok") continue;
    for (const auto& [who, list] : by_proc) {
      if (who.first == b.proc) continue;
      // The last acquire of that process that began J or more before b.
      auto it = std::upper_bound(list.begin(), list.end(), b.invoke_t - join_bound_ns,
                                 [](std::int64_t t, const AcquireRec* x) { return t < x->invoke_t; });
      if (it == list.begin()) continue;
      const AcquireRec& a = **(it - 1);
      const std::int64_t a_end = end_of(a);
      if (a_end <= b.invoke_t) continue;  // out of the line before b began
      // A server that answered nobody lately (starting, stalled) may not
      // have counted a's request either.
      if (!serving(a.invoke_t - 4 * join_bound_ns, a.invoke_t + join_bound_ns)) continue;
      ++r.line_pairs_judged;
      if (a_end <= b.done_t) continue;  // left (or was granted) before b's ok
      LineOvertake o;
      o.waiter = a.phase == "ok" ? a.grant : a.proc + "/" + std::to_string(a.inc) + " acquire at " + at_ms(a.invoke_t);
      o.overtaker = b.grant;
      o.waiter_invoke_t = a.invoke_t;
      o.overtaker_invoke_t = b.invoke_t;
      o.overtaker_ok_t = b.done_t;
      o.waiter_end_t = a_end;
      o.waiter_outcome = a.done_t == kNever ? (a_end < run_end ? "died" : "waiting") : a.phase;
      if (a.phase == "info") {
        o.excused = true;
        o.excuse = "the waiter's acquire has no known outcome";
      }
      for (const FaultWindow& w : faults) {
        if (o.excused) break;
        if (!drops_from_line(w.kind) || !hits(w.target, a.proc)) continue;
        if (w.start_t > b.done_t) continue;
        // Its own fault, just over: its client may not be back in touch (a
        // new connection, a new session) when it begins.
        const bool own = w.target == a.proc;
        if (w.end_t < a.invoke_t && !(own && a.invoke_t - w.end_t < recovery_ns)) continue;
        o.excused = true;
        o.excuse = fault_label(w) + (w.end_t < a.invoke_t ? " just before " : " while ") + a.proc + " waited";
      }
      if (o.excused) {
        ++r.line_overtakes_excused;
        if (excused.size() < kMaxListed) excused.push_back(std::move(o));
      } else {
        ++r.line_overtakes;
        if (r.overtakes.size() < kMaxListed) r.overtakes.push_back(std::move(o));
      }
    }
  }
  for (auto& o : excused)
    if (r.overtakes.size() < kMaxListed) r.overtakes.push_back(std::move(o));
}

void count_reader_overlaps(const std::vector<Hold>& holds, RecipeFindings& r) {
  std::multiset<std::int64_t> active;  // end times of the reads held
  for (const Hold& h : holds) {        // sorted by ok_t
    if (h.kind == "exclusive") ++r.exclusive_grants;
    if (h.kind != "shared") continue;
    ++r.shared_grants;
    while (!active.empty() && *active.begin() <= h.ok_t) active.erase(active.begin());
    r.reader_overlaps += static_cast<std::int64_t>(active.size());
    if (h.end_t > h.ok_t) active.insert(h.end_t);
    r.reader_overlap_max = std::max<std::int64_t>(r.reader_overlap_max, static_cast<std::int64_t>(active.size()));
  }
}

namespace {

bool is_pause(const std::string& kind) { return kind == "pause" || kind == "failpoint-pause"; }

// Whether h's holder was stopped during the hold: it may believe it holds
// a permit it lost.
bool paused_during(const Hold& h, const std::vector<FaultWindow>& faults) {
  for (const FaultWindow& w : faults)
    if (is_pause(w.kind) && w.target == h.proc && w.start_t < h.end_t && w.end_t > h.ok_t) return true;
  return false;
}

// The first time at or after `from` at which `permits` holds other than
// holds[skip], none of them paused, are held at once; -1 if never.
std::int64_t first_full_after(const std::vector<Hold>& holds, const std::vector<FaultWindow>& faults, std::size_t skip,
                              std::int64_t from, unsigned permits) {
  std::vector<std::pair<std::int64_t, int>> steps;  // (t, +1/-1); ends sort first
  for (std::size_t i = 0; i < holds.size(); ++i) {
    const Hold& h = holds[i];
    if (i == skip || h.end_t <= from || paused_during(h, faults)) continue;
    steps.emplace_back(std::max(h.ok_t, from), +1);
    steps.emplace_back(h.end_t, -1);
  }
  std::sort(steps.begin(), steps.end());
  int n = 0;
  for (const auto& [t, d] : steps) {
    n += d;
    if (n >= static_cast<int>(permits)) return t;
  }
  return -1;
}

// The first fault of a holder in `active` that explains their number at
// `t`; "" if none.
std::string explain_excess(const std::set<std::size_t>& active, const std::vector<Hold>& holds,
                           const std::vector<FaultWindow>& faults, std::int64_t t) {
  for (std::size_t i : active) {
    const Hold& h = holds[i];
    for (const FaultWindow& w : faults) {
      if (!explains_overlap(w.kind) || !hits(w.target, h.proc)) continue;
      if (w.start_t > t || w.end_t < h.ok_t) continue;
      return fault_label(w) + " during " + h.grant + "'s hold";
    }
  }
  return {};
}

// Intervals with more holders than permits; listed unexplained first.
void find_excesses(const std::vector<Hold>& holds, const std::vector<FaultWindow>& faults, unsigned permits,
                   RecipeFindings& r) {
  struct Step {
    std::int64_t t;
    int d;
    std::size_t i;
  };
  std::vector<Step> steps;
  for (std::size_t i = 0; i < holds.size(); ++i) {
    if (holds[i].end_t <= holds[i].ok_t) continue;
    steps.push_back({holds[i].ok_t, +1, i});
    steps.push_back({holds[i].end_t, -1, i});
  }
  // At one instant, ends first: a hold ending when another begins is no
  // overlap (as for the mutex's).
  std::sort(steps.begin(), steps.end(),
            [](const Step& a, const Step& b) { return a.t != b.t ? a.t < b.t : a.d < b.d; });
  std::set<std::size_t> active;
  std::vector<CapacityExcess> explained;
  std::optional<CapacityExcess> open;
  for (const Step& s : steps) {
    if (s.d > 0)
      active.insert(s.i);
    else
      active.erase(s.i);
    const int n = static_cast<int>(active.size());
    r.max_holders = std::max(r.max_holders, n);
    if (n > static_cast<int>(permits)) {
      if (!open) {
        open = CapacityExcess{};
        open->start_t = s.t;
        for (std::size_t i : active) open->grants.push_back(holds[i].grant);
        open->explanation = explain_excess(active, holds, faults, s.t);
        open->explained = !open->explanation.empty();
      }
      open->holders = std::max(open->holders, n);
    } else if (open) {
      open->end_t = s.t;
      if (open->explained) {
        ++r.excess_explained;
        if (explained.size() < kMaxListed) explained.push_back(std::move(*open));
      } else {
        ++r.excess_unexplained;
        if (r.excesses.size() < kMaxListed) r.excesses.push_back(std::move(*open));
      }
      open.reset();
    }
  }
  for (auto& e : explained)
    if (r.excesses.size() < kMaxListed) r.excesses.push_back(std::move(e));
}

// Permits lost with their holders: killed while holding, or stopped for
// longer than the lease while holding; each with the time until the
// others held every permit again.
void find_lost_permits(const std::vector<Hold>& holds, const std::vector<FaultWindow>& faults, unsigned permits,
                       std::int64_t ttl_ns, std::int64_t run_end, RecipeFindings& r) {
  for (std::size_t i = 0; i < holds.size(); ++i) {
    const Hold& h = holds[i];
    auto record = [&](const std::string& cause, std::int64_t t) {
      PermitRecovery p;
      p.grant = h.grant;
      p.cause = cause;
      p.t = t;
      const std::int64_t full = first_full_after(holds, faults, i, t, permits);
      p.recovery_ms = full < 0 || full > run_end ? -1 : to_ms(full - t);
      r.permit_recoveries.push_back(std::move(p));
    };
    if (h.end_reason == "killed") {
      record("killed", h.end_t);
      continue;
    }
    for (const FaultWindow& w : faults) {
      if (!is_pause(w.kind) || w.target != h.proc) continue;
      if (w.start_t < h.ok_t || w.start_t >= h.end_t || w.end_t - w.start_t <= ttl_ns) continue;
      record(w.kind, w.start_t);
      break;
    }
  }
  std::sort(r.permit_recoveries.begin(), r.permit_recoveries.end(),
            [](const PermitRecovery& a, const PermitRecovery& b) { return a.t < b.t; });
}

}  // namespace

void check_capacity(const std::vector<Hold>& holds, const std::vector<FaultWindow>& faults, unsigned permits,
                    std::int64_t ttl_ns, std::int64_t run_end, RecipeFindings& r) {
  r.permits = permits;
  find_excesses(holds, faults, permits, r);
  find_lost_permits(holds, faults, permits, ttl_ns, run_end, r);
}

void check_election(const std::vector<Event>& events, const std::vector<Hold>& holds, RecipeFindings& r) {
  std::map<std::uint64_t, std::vector<const Hold*>> by_term;
  std::unordered_map<std::string, const Hold*> by_grant;
  for (const Hold& h : holds) {
    by_grant.emplace(h.grant, &h);
    if (h.fence != 0) by_term[h.fence].push_back(&h);
  }
  r.terms = static_cast<std::int64_t>(by_term.size());
  for (const auto& [term, leaders] : by_term) {
    if (leaders.size() < 2) continue;
    r.term_clashes += static_cast<std::int64_t>(leaders.size()) - 1;
    if (r.clashes.size() < kMaxListed) {
      std::string s;
      for (const Hold* h : leaders) s += (s.empty() ? "" : " and ") + h->grant;
      r.clashes.push_back(s + ": term " + std::to_string(term));
    }
  }
  // The highest term granted before each instant (holds are in ok order).
  std::vector<std::pair<std::int64_t, std::uint64_t>> max_term;  // (ok_t, max fence so far)
  std::uint64_t m = 0;
  for (const Hold& h : holds) {
    m = std::max(m, h.fence);
    max_term.emplace_back(h.ok_t, m);
  }
  auto highest_before = [&](std::int64_t t) -> std::uint64_t {
    auto it =
        std::lower_bound(max_term.begin(), max_term.end(), t,
                         [](const std::pair<std::int64_t, std::uint64_t>& x, std::int64_t v) { return x.first < v; });
    return it == max_term.begin() ? 0 : (it - 1)->second;
  };
  std::unordered_map<std::string, std::deque<bool>> pending;  // grant -> deposed? of its open writes
  for (const Event& e : events) {
    if (e.op != "fenced_write" || e.grant.empty()) continue;
    auto g = by_grant.find(e.grant);
    if (g == by_grant.end()) continue;
    if (e.phase == "invoke") {
      ++r.leader_writes;
      const bool deposed = g->second->fence != 0 && highest_before(e.t) > g->second->fence;
      if (deposed) ++r.deposed_writes;
      pending[e.grant].push_back(deposed);
      continue;
    }
    auto& q = pending[e.grant];
    if (q.empty()) continue;
    const bool deposed = q.front();
    q.pop_front();
    if (!deposed) continue;
    if (e.phase == "ok")
      ++r.deposed_accepted;
    else if (e.phase == "fail")
      ++r.deposed_rejected;
    else
      ++r.deposed_unknown;
  }
  for (const auto& [grant, q] : pending)
    for (bool deposed : q)
      if (deposed) ++r.deposed_unknown;  // no outcome logged
}

RecipeFindings check_recipe(const std::vector<Event>& events, const Index& ix, const std::vector<Hold>& holds,
                            const std::vector<FaultWindow>& faults, const RunInfo& info, std::int64_t run_end) {
  RecipeFindings r;
  r.recipe = info.recipe;
  if (info.recipe.empty()) return r;
  if ((info.recipe == "fair" || info.recipe == "election") && info.line_join_bound_ms > 0)
    check_line_order(ix, faults, info.line_join_bound_ms * kNsPerMs, (info.ttl_ms + info.recovery_slack_ms) * kNsPerMs,
                     run_end, r);
  if (info.recipe == "rw") count_reader_overlaps(holds, r);
  if (info.recipe == "semaphore")
    check_capacity(holds, faults, std::max(1u, info.permits), info.ttl_ms * kNsPerMs, run_end, r);
  if (info.recipe == "election") check_election(events, holds, r);
  return r;
}

}  // namespace torture

#include "analysis.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <set>
#include <unordered_map>
#include <utility>

#include "analysis_index.hpp"
#include "recipe_check.hpp"

namespace torture {
namespace {

std::vector<Hold> build_holds(const Index& ix, std::int64_t run_end) {
  std::vector<Hold> holds;
  for (const AcquireRec& a : ix.acquires) {
    if (a.phase != "ok") continue;
    Hold h;
    h.grant = a.grant;
    h.proc = a.proc;
    h.inc = a.inc;
    h.invoke_t = a.invoke_t;
    h.ok_t = a.done_t;
    h.fence = a.fence;
    h.kind = a.kind;
    h.end_t = std::max(run_end, h.ok_t);
    h.end_reason = "end-of-run";
    auto consider = [&h](std::int64_t t, const char* reason) {
      if (t < h.end_t) {
        h.end_t = std::max(t, h.ok_t);
        h.end_reason = reason;
      }
    };
    if (auto it = ix.releases.find(a.grant); it != ix.releases.end() && it->second.invoke_t >= h.ok_t) {
      consider(it->second.invoke_t, "release");
      h.release_phase = it->second.phase.empty() ? "info" : it->second.phase;
    }
    if (auto it = ix.lost.find(a.grant); it != ix.lost.end()) consider(it->second, "lost");
    consider(death_after(ix, a.proc, a.inc, h.ok_t), "killed");
    holds.push_back(std::move(h));
  }
  std::stable_sort(holds.begin(), holds.end(), [](const Hold& x, const Hold& y) { return x.ok_t < y.ok_t; });
  return holds;
}

// Fault windows, in time order. The nemesis' "fault" events open (invoke)
// and close (ok) windows, paired by kind and target. A worker that stops
// itself at a failpoint logs "failpoint ... pause" just before: that event
// dates the window, since the nemesis notices the stop only later (or never,
// once its loop has ended), and the nemesis' own start of the same pause is
// folded into it. Every window closes: at its end event; a self-pause also
// at the worker's next event of its own (a stopped process logs nothing;
// "lost" comes from another thread and may race the stop); anything still
// open at the verifier's "heal" after the nemesis loop, which resumes and
// heals everything; failing all that, at the end of the run.
std::vector<FaultWindow> build_faults(const std::vector<Event>& events, std::int64_t run_end) {
  std::vector<FaultWindow> out;
  std::map<std::pair<std::string, std::string>, std::deque<std::size_t>> open;  // (kind, target)
  std::map<std::string, std::size_t> self_paused;                               // worker -> its open self-pause
  auto close = [&out](std::size_t i, std::int64_t t) {
    out[i].end_t = std::min(out[i].end_t, std::max(t, out[i].start_t));
  };
  auto unqueue = [&open](std::size_t i, const FaultWindow& w) {
    auto& q = open[{w.kind, w.target}];
    q.erase(std::remove(q.begin(), q.end(), i), q.end());
  };
  for (const Event& e : events) {
    if (e.op == "heal") {
      for (auto& [key, q] : open)
        for (std::size_t i : q) close(i, e.t);
      open.clear();
      self_paused.clear();
      continue;
    }
    if (e.op == "failpoint" && e.detail == "pause" && is_worker(e.proc)) {
      if (auto it = self_paused.find(e.proc); it != self_paused.end()) {  // it ran again to get here
        close(it->second, e.t);
        unqueue(it->second, out[it->second]);
      }
      open[{"failpoint-pause", e.proc}].push_back(out.size());
      self_paused[e.proc] = out.size();
      out.push_back({"failpoint-pause", e.proc, e.t, kNever, "the worker's own event: failpoint " + e.kind + " pause"});
      continue;
    }
    if (e.op != "fault") {
      if (auto it = self_paused.find(e.proc); it != self_paused.end() && e.op != "lost") {
        close(it->second, e.t);  // running again
        unqueue(it->second, out[it->second]);
        self_paused.erase(it);
      }
      continue;
    }
    if (e.phase == "invoke") {
      if (e.kind == "failpoint-pause") {
        if (auto it = self_paused.find(e.target); it != self_paused.end()) {
          out[it->second].proof += "; " + e.detail;  // the same stop, seen by the nemesis
          continue;
        }
      }
      const bool instant = is_instant_fault(e.kind);
      if (!instant) open[{e.kind, e.target}].push_back(out.size());
      out.push_back({e.kind, e.target, e.t, instant ? e.t : kNever, e.detail});
    } else if (e.phase == "ok") {
      auto& q = open[{e.kind, e.target}];
      if (q.empty()) continue;
      close(q.front(), e.t);
      if (e.kind == "failpoint-pause") self_paused.erase(e.target);
      q.pop_front();
    }
  }
  for (FaultWindow& w : out)
    if (w.end_t == kNever) w.end_t = std::max(run_end, w.start_t);  // never healed: lasts the run
  return out;
}

// ---------------------------------------------------------------------------
// Checkers over holds.

// `notice_ns`: how soon the holder of a deleted or replaced SQLite file must
// be told. Its lock ends with the file, but until it is told a grant in the
// new file overlaps it (docs/sql.md): that overlap is the fault's only if
// the old holder was told within the bound.
std::string explain(const Hold& first, const Hold& second, const std::vector<FaultWindow>& faults,
                    std::int64_t notice_ns) {
  for (const FaultWindow& w : faults) {
    if (w.kind == "file-delete" || w.kind == "file-replace") {
      if (w.start_t <= second.ok_t && first.ok_t <= w.end_t && first.end_t - w.start_t <= notice_ns)
        return fault_label(w) + " during " + first.grant + "'s hold, told " +
               std::to_string(to_ms(first.end_t - w.start_t)) + " ms after";
      continue;
    }
    if (!explains_overlap(w.kind)) continue;
    // A server fault (a Redlock node's too) can take the lock from anyone.
    if (w.target != first.proc && w.target != "server" && w.target != "all" && w.target.rfind("node", 0) != 0) continue;
    if (w.start_t > second.ok_t || w.end_t < first.ok_t) continue;
    return fault_label(w) + " during " + first.grant + "'s hold";
  }
  return {};
}

// Holds are sorted by ok_t; the active set holds those not yet ended, so the
// sweep costs O(n log n + overlaps).
// rw: only a writer's hold conflicts (readers share).
bool conflict(const Hold& a, const Hold& b, bool rw) { return !rw || a.kind == "exclusive" || b.kind == "exclusive"; }

void find_overlaps(const std::vector<Hold>& holds, const std::vector<FaultWindow>& faults, bool rw,
                   std::int64_t notice_ns, Findings& f) {
  std::multimap<std::int64_t, std::size_t> active;  // end_t -> hold
  std::int64_t total_ns = 0, max_ns = 0;
  for (std::size_t i = 0; i < holds.size(); ++i) {
    const Hold& h = holds[i];
    while (!active.empty() && active.begin()->first <= h.ok_t) active.erase(active.begin());
    for (const auto& [end_t, j] : active) {
      const Hold& first = holds[j];
      if (first.grant == h.grant || !conflict(first, h, rw)) continue;
      Overlap o;
      o.first_grant = first.grant;
      o.second_grant = h.grant;
      o.first_fence = first.fence;
      o.second_fence = h.fence;
      o.start_t = h.ok_t;
      o.end_t = std::min(end_t, h.end_t);
      o.explanation = explain(first, h, faults, notice_ns);
      o.explained = !o.explanation.empty();
      if (!o.explained) ++f.unexplained_overlaps;
      total_ns += o.end_t - o.start_t;
      max_ns = std::max(max_ns, o.end_t - o.start_t);
      f.overlaps.push_back(std::move(o));
    }
    if (h.end_t > h.ok_t) active.emplace(h.end_t, i);
  }
  // Unexplained first: reports cut long lists, and those are the ones to read.
  std::stable_sort(f.overlaps.begin(), f.overlaps.end(), [](const Overlap& a, const Overlap& b) {
    if (a.explained != b.explained) return !a.explained;
    return a.start_t < b.start_t;
  });
  f.overlap_total_ms = to_ms(total_ns);
  f.overlap_max_ms = to_ms(max_ns);
}

// Writes in the server's order; a write is stale when some earlier-ordered
// write came from a grant whose acquire began after this write's grant was
// given. Tracking the latest such acquire invoke makes it one pass.
void find_stale_writes(const std::vector<Event>& events, const std::string& op,
                       const std::unordered_map<std::string, const Hold*>& by_grant, Findings& f, std::int64_t& count) {
  struct W {
    std::int64_t seq, t;
    const Hold* hold;
  };
  std::vector<W> writes;
  for (const Event& e : events) {
    if (e.op != op || e.phase != "ok" || !e.seq) continue;
    auto it = by_grant.find(e.grant);
    if (it != by_grant.end()) writes.push_back({*e.seq, e.t, it->second});
  }
  std::stable_sort(writes.begin(), writes.end(), [](const W& a, const W& b) { return a.seq < b.seq; });
  std::int64_t latest_invoke = std::numeric_limits<std::int64_t>::min();
  const W* latest = nullptr;
  std::size_t listed = 0;
  for (const W& w : writes) {
    if (latest != nullptr && latest_invoke > w.hold->ok_t) {
      ++count;
      if (listed++ < kMaxListed)
        f.stale_writes.push_back({op, w.hold->grant, latest->hold->grant, w.seq, latest->seq, w.t});
    }
    if (w.hold->invoke_t > latest_invoke) {
      latest_invoke = w.hold->invoke_t;
      latest = &w;
    }
  }
}

// For each grant in invoke order, the largest fence among grants completed
// before that invoke must be smaller than its own.
// rw: only writers' fences are promised to be above every earlier grant's.
void find_fence_anomalies(const std::vector<Hold>& holds, bool writers_only, Findings& f) {
  std::vector<const Hold*> by_ok, by_invoke;
  for (const Hold& h : holds)
    if (h.fence != 0) by_ok.push_back(&h);
  for (const Hold* h : by_ok)
    if (!writers_only || h->kind == "exclusive") by_invoke.push_back(h);
  std::stable_sort(by_invoke.begin(), by_invoke.end(),
                   [](const Hold* a, const Hold* b) { return a->invoke_t < b->invoke_t; });
  std::size_t next = 0;
  const Hold* max_hold = nullptr;
  for (const Hold* later : by_invoke) {
    for (; next < by_ok.size() && by_ok[next]->ok_t < later->invoke_t; ++next)
      if (max_hold == nullptr || by_ok[next]->fence > max_hold->fence) max_hold = by_ok[next];
    if (max_hold == nullptr || later->fence > max_hold->fence) continue;
    ++f.fence_anomaly_count;
    if (f.fence_anomalies.size() < kMaxListed)
      f.fence_anomalies.push_back({max_hold->grant, later->grant, max_hold->fence, later->fence});
  }
}

// A release that succeeded while a later grant still believed it held the
// lock. The victim named is the most recent such grant: the lock's owner.
void find_foreign_releases(const Index& ix, const std::vector<Hold>& holds,
                           const std::unordered_map<std::string, const Hold*>& by_grant, Findings& f) {
  for (const auto& [grant, rel] : ix.releases) {
    if (rel.phase != "ok") continue;
    auto own = by_grant.find(grant);
    if (own == by_grant.end()) continue;
    const Hold& g = *own->second;
    if (rel.invoke_t <= g.ok_t) continue;  // no grant can fall between
    auto lo =
        std::upper_bound(holds.begin(), holds.end(), g.ok_t, [](std::int64_t t, const Hold& h) { return t < h.ok_t; });
    auto hi = std::lower_bound(holds.begin(), holds.end(), rel.invoke_t,
                               [](const Hold& h, std::int64_t t) { return h.ok_t < t; });
    const Hold* victim = nullptr;
    for (auto it = lo; it != hi; ++it)
      if (it->grant != grant && it->end_t > rel.invoke_t) victim = &*it;
    if (victim != nullptr) f.foreign_releases.push_back({grant, victim->grant, rel.done_t});
  }
  std::sort(f.foreign_releases.begin(), f.foreign_releases.end(),
            [](const ForeignRelease& a, const ForeignRelease& b) { return a.t < b.t; });
}

void find_recoveries(const Index& ix, const std::vector<Hold>& holds, const RunInfo& info, std::int64_t run_end,
                     Findings& f) {
  const std::int64_t bound_ns = (info.ttl_ms + info.recovery_slack_ms) * kNsPerMs;
  std::vector<std::pair<std::int64_t, std::string>> deaths;  // (t, proc)
  for (const auto& [proc, times] : ix.deaths)
    for (std::int64_t t : times) deaths.emplace_back(t, proc);
  for (std::int64_t t : ix.deaths_all)
    for (const auto& [proc, incs] : ix.first_seen) deaths.emplace_back(t, proc);
  std::sort(deaths.begin(), deaths.end());
  // Time from the death to the next grant to anyone.
  auto record = [&](const std::string& dead, std::int64_t t) {
    Recovery r;
    r.dead_grant = dead;
    r.death_t = t;
    auto next =
        std::upper_bound(holds.begin(), holds.end(), t, [](std::int64_t x, const Hold& o) { return x < o.ok_t; });
    if (next != holds.end()) {
      r.next_grant_t = next->ok_t;
      r.recovery_ms = to_ms(next->ok_t - t);
      r.within_bound = next->ok_t - t <= bound_ns;
    } else if (run_end - t > bound_ns) {
      ++f.lockouts;
    }
    f.recoveries.push_back(std::move(r));
  };
  std::set<std::string> seen;  // one recovery per dead grant
  for (const auto& [t, proc] : deaths) {
    for (const Hold& h : holds) {
      if (h.ok_t > t) break;
      const bool held = h.end_t > t || (h.end_t == t && h.end_reason == "killed");
      if (h.proc == proc && held && seen.insert(h.grant).second) record(h.grant, t);
    }
    // An acquire cut off by the death may have taken the lock on the server
    // (a non-atomic acquire killed half-way): the lock must free as well.
    for (const AcquireRec& a : ix.acquires) {
      if (a.invoke_t > t) break;
      if (a.proc == proc && a.phase.empty() && seen.insert(a.grant).second) record(a.grant + " (acquire in flight)", t);
    }
  }
}

// Nearest-rank percentile of sorted values.
std::int64_t percentile(const std::vector<std::int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

void measure_liveness(const Index& ix, const std::vector<Hold>& holds, std::int64_t run_start, std::int64_t run_end,
                      Findings& f) {
  std::vector<std::int64_t> lat;
  for (const Hold& h : holds) lat.push_back(h.ok_t - h.invoke_t);
  std::sort(lat.begin(), lat.end());
  f.acquire_p50_ms = to_ms(percentile(lat, 0.50));
  f.acquire_p99_ms = to_ms(percentile(lat, 0.99));
  f.acquire_max_ms = lat.empty() ? 0 : to_ms(lat.back());
  f.grants = static_cast<std::int64_t>(holds.size());
  if (run_end > run_start)
    f.grants_per_s = static_cast<double>(f.grants) * 1e9 / static_cast<double>(run_end - run_start);

  // Unavailable: nobody holds while someone waits. Steps are (t, holds, pending).
  struct Step {
    std::int64_t t;
    int holds, pending;
  };
  std::vector<Step> steps;
  for (const Hold& h : holds) {
    steps.push_back({h.ok_t, +1, 0});
    steps.push_back({h.end_t, -1, 0});
  }
  for (const AcquireRec& a : ix.acquires) {
    std::int64_t done = a.done_t;
    if (done == kNever) done = std::min(death_after(ix, a.proc, a.inc, a.invoke_t), run_end);
    if (done < a.invoke_t) continue;
    steps.push_back({a.invoke_t, 0, +1});
    steps.push_back({done, 0, -1});
  }
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.t < b.t; });
  int holding = 0, pending = 0;
  std::int64_t gap_start = -1, longest = 0;
  for (std::size_t i = 0; i < steps.size();) {
    const std::int64_t t = steps[i].t;
    for (; i < steps.size() && steps[i].t == t; ++i) {
      holding += steps[i].holds;
      pending += steps[i].pending;
    }
    const bool unavailable = holding <= 0 && pending > 0;
    if (unavailable && gap_start < 0) gap_start = t;
    if (!unavailable && gap_start >= 0) {
      longest = std::max(longest, t - gap_start);
      gap_start = -1;
    }
  }
  if (gap_start >= 0 && run_end > gap_start) longest = std::max(longest, run_end - gap_start);
  f.max_unavailable_ms = to_ms(longest);
}

}  // namespace

std::string fault_label(const FaultWindow& w) {
  return w.kind + " of " + w.target + " (" + std::to_string(to_ms(w.end_t - w.start_t)) + " ms)";
}

bool explains_overlap(const std::string& kind) {
  return kind == "pause" || kind == "failpoint-pause" || kind == "late-reply" || kind == "server-clock" ||
         kind == "restart" || kind == "failover" || kind == "operator-delete";
}

// Bounded barging: for each acquire, the grants to other workers between its
// invoke and its outcome (or the end of its worker's incarnation), but for
// those made while its own worker was stopped (a stopped waiter cannot take
// its turn: the others must go on without it).
void measure_waited_through(const std::vector<Event>& events, const std::vector<Hold>& holds,
                            const std::vector<FaultWindow>& faults, std::int64_t run_end, Findings& f) {
  std::vector<std::pair<std::int64_t, const std::string*>> grants;
  for (const Hold& h : holds) grants.emplace_back(h.ok_t, &h.proc);
  std::sort(grants.begin(), grants.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  auto stopped = [&](const std::string& proc, std::int64_t t) {
    for (const FaultWindow& w : faults)
      if (w.target == proc && w.kind.find("pause") != std::string::npos && w.start_t <= t && t <= w.end_t) return true;
    return false;
  };
  auto through = [&](const std::string& proc, std::int64_t from, std::int64_t to) {
    std::int64_t n = 0;
    auto it =
        std::upper_bound(grants.begin(), grants.end(), from, [](std::int64_t t, const auto& g) { return t < g.first; });
    for (; it != grants.end() && it->first < to; ++it) n += *it->second != proc && !stopped(proc, it->first);
    return n;
  };
  std::map<std::pair<std::string, int>, std::int64_t> pending;  // incarnation -> invoke t
  std::map<std::string, bool> granted;                          // worker -> ever granted
  for (const Event& e : events) {
    if (e.op != "acquire" || e.proc.empty() || e.proc[0] != 'w') continue;
    const auto key = std::make_pair(e.proc, e.inc);
    if (e.phase == "invoke") {
      pending[key] = e.t;
      granted.emplace(e.proc, false);
      continue;
    }
    auto it = pending.find(key);
    if (it == pending.end()) continue;
    f.waited_through_max = std::max(f.waited_through_max, through(e.proc, it->second, e.t));
    if (e.phase == "ok") granted[e.proc] = true;
    pending.erase(it);
  }
  for (const auto& [key, t] : pending)
    f.waited_through_max = std::max(f.waited_through_max, through(key.first, t, run_end));
  for (const auto& [proc, ok] : granted) f.starved += !ok;
}

Findings analyze(const std::vector<Event>& events, const RunInfo& info) {
  Findings f;
  const Index ix = index_events(events);
  const std::int64_t run_start = info.run_start_t != 0 ? info.run_start_t : ix.first_t;
  const std::int64_t run_end = info.run_end_t != 0 ? info.run_end_t : ix.last_t;

  for (const Event& e : events) {
    OpCounts& c = f.ops[e.op];
    if (e.phase == "invoke")
      ++c.invoke;
    else if (e.phase == "ok" || e.phase.empty())
      ++c.ok;  // phase-less events (failpoint) happened
    else if (e.phase == "fail")
      ++c.fail;
    else if (e.phase == "info")
      ++c.info;
    if (e.op == "lost") ++f.losses_notified;
    if (e.op == "fenced_write" && e.phase == "ok") ++f.fenced_accepted;
    if (e.op == "fenced_write" && e.phase == "fail") ++f.fenced_rejected;
    if (e.op == "counter_write" && e.phase == "ok") ++f.counter_acked;
    if (e.op == "final" && e.kind == "counter" && e.value) f.counter_final = e.value;
  }
  // Each incarnation's wake-up counter only grows: its last value counts.
  std::map<std::pair<std::string, int>, std::int64_t> wakeups;
  for (const Event& e : events)
    if (e.op == "wakeups" && e.value) wakeups[{e.proc, e.inc}] = std::max(wakeups[{e.proc, e.inc}], *e.value);
  if (!wakeups.empty()) {
    f.wakeups = 0;
    for (const auto& [who, n] : wakeups) f.wakeups += n;
    const std::int64_t releases = f.ops["release"].ok;
    f.wakeups_per_release = releases > 0 ? static_cast<double>(f.wakeups) / static_cast<double>(releases) : 0;
  }
  if (f.counter_final) {
    f.lost_updates = std::max<std::int64_t>(0, f.counter_acked - *f.counter_final);
    if (f.counter_acked > 0)
      f.lost_pct = 100.0 * static_cast<double>(f.lost_updates) / static_cast<double>(f.counter_acked);
  }

  f.holds = build_holds(ix, run_end);
  f.faults = build_faults(events, run_end);
  std::unordered_map<std::string, const Hold*> by_grant;
  for (const Hold& h : f.holds) by_grant.emplace(h.grant, &h);

  const bool rw = info.recipe == "rw";
  const bool semaphore = info.recipe == "semaphore";
  // A semaphore's permits overlap by design: check_capacity counts them.
  if (!semaphore) find_overlaps(f.holds, f.faults, rw, info.recovery_slack_ms * kNsPerMs, f);
  // A loss must reach its holder before anyone else is granted the lock.
  for (const Hold& h : f.holds) {
    if (h.end_reason != "lost") continue;
    std::int64_t next = std::numeric_limits<std::int64_t>::max();
    for (const Hold& o : f.holds)
      if (o.proc != h.proc && o.ok_t > h.ok_t) next = std::min(next, o.ok_t);
    (h.end_t <= next ? f.losses_told_first : f.losses_told_late) += 1;
  }
  find_stale_writes(events, "fenced_write", by_grant, f, f.stale_fenced);
  find_stale_writes(events, "unfenced_write", by_grant, f, f.stale_unfenced);
  find_fence_anomalies(f.holds, rw, f);
  // A reader's or a permit's release while others hold is no foreign one.
  if (!rw && !semaphore) find_foreign_releases(ix, f.holds, by_grant, f);
  find_recoveries(ix, f.holds, info, run_end, f);
  measure_liveness(ix, f.holds, run_start, run_end, f);
  measure_waited_through(events, f.holds, f.faults, run_end, f);
  if (rw || semaphore)
    f.model = {"n/a", "shared holds: judged by the " + info.recipe + " checks",
               f.ops["acquire"].invoke + f.ops["release"].invoke};
  else
    f.model = check_mutex_model(events, f.holds);
  f.recipe = check_recipe(events, ix, f.holds, f.faults, info, run_end);
  return f;
}

}  // namespace torture

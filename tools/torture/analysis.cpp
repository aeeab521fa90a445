#include "analysis.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <set>
#include <unordered_map>
#include <utility>

namespace torture {
namespace {

constexpr std::int64_t kNsPerMs = 1'000'000;
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

// Nanoseconds to milliseconds, rounded to nearest (durations are >= 0).
std::int64_t to_ms(std::int64_t ns) { return (ns + kNsPerMs / 2) / kNsPerMs; }

bool is_instant_fault(const std::string& kind) { return kind == "kill" || kind == "crash"; }

bool is_worker(const std::string& target) { return target != "server" && target != "all" && !target.empty(); }

std::string plural(std::int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// ---------------------------------------------------------------------------
// One pass over the events: acquires paired with their outcome, the first
// release of each grant, lost notifications, deaths and incarnations.

struct AcquireRec {
  std::string proc;
  int inc = 0;
  std::int64_t invoke_t = 0;
  std::int64_t done_t = kNever;  // kNever: no outcome logged
  std::string phase;             // ok | fail | info | "" (no outcome)
  std::string grant;
  std::uint64_t fence = 0;
};

struct ReleaseRec {
  std::int64_t invoke_t = 0;
  std::int64_t done_t = kNever;
  std::string phase;  // "" until an outcome is seen
};

struct Index {
  std::vector<AcquireRec> acquires;                     // in invoke order
  std::unordered_map<std::string, ReleaseRec> releases;  // first release per grant
  std::unordered_map<std::string, std::int64_t> lost;   // first "lost" per grant
  std::map<std::string, std::vector<std::int64_t>> deaths;  // proc -> times
  std::vector<std::int64_t> deaths_all;                 // kill/crash of "all"
  std::map<std::string, std::map<int, std::int64_t>> first_seen;  // proc -> inc -> t
  std::int64_t first_t = 0, last_t = 0;
};

Index index_events(const std::vector<Event>& events) {
  Index ix;
  if (!events.empty()) {
    ix.first_t = events.front().t;
    ix.last_t = events.back().t;
  }
  // Pending acquires per (proc, inc), oldest first: a worker's acquires are
  // sequential, so an outcome belongs to the oldest open invoke.
  std::map<std::pair<std::string, int>, std::deque<std::size_t>> open;
  for (const Event& e : events) {
    if (e.inc > 0 && is_worker(e.proc)) ix.first_seen[e.proc].emplace(e.inc, e.t);
    if (e.op == "acquire") {
      auto& q = open[{e.proc, e.inc}];
      if (e.phase == "invoke") {
        q.push_back(ix.acquires.size());
        ix.acquires.push_back({e.proc, e.inc, e.t, kNever, "", e.grant, 0});
        continue;
      }
      AcquireRec* a = nullptr;
      if (!q.empty()) {
        a = &ix.acquires[q.front()];
        q.pop_front();
      } else {  // outcome without a logged invoke: the invoke is taken as the outcome's time
        ix.acquires.push_back({e.proc, e.inc, e.t, kNever, "", "", 0});
        a = &ix.acquires.back();
      }
      a->done_t = e.t;
      a->phase = e.phase;
      if (!e.grant.empty()) a->grant = e.grant;
      a->fence = e.fence.value_or(0);
    } else if (e.op == "release" && !e.grant.empty()) {
      if (e.phase == "invoke") {
        ix.releases.try_emplace(e.grant, ReleaseRec{e.t, kNever, ""});
      } else if (auto it = ix.releases.find(e.grant); it != ix.releases.end() && it->second.phase.empty()) {
        it->second.done_t = e.t;
        it->second.phase = e.phase;
      }
    } else if (e.op == "lost" && !e.grant.empty()) {
      ix.lost.try_emplace(e.grant, e.t);
    } else if (e.op == "fault" && e.phase == "invoke" && is_instant_fault(e.kind)) {
      if (e.target == "all")
        ix.deaths_all.push_back(e.t);
      else if (is_worker(e.target))
        ix.deaths[e.target].push_back(e.t);
    } else if (e.op == "failpoint" && e.detail == "kill" && is_worker(e.proc)) {
      ix.deaths[e.proc].push_back(e.t);  // the worker kills itself right after logging
    }
  }
  return ix;
}

// First time at or after `from` at which incarnation `inc` of `proc` is known
// dead: a kill/crash of it, or (should that event be missing) the first event
// of a later incarnation. kNever if it outlived the history.
std::int64_t death_after(const Index& ix, const std::string& proc, int inc, std::int64_t from) {
  std::int64_t t = kNever;
  auto first_at_or_after = [&](const std::vector<std::int64_t>& v) {
    auto it = std::lower_bound(v.begin(), v.end(), from);
    if (it != v.end()) t = std::min(t, *it);
  };
  if (auto it = ix.deaths.find(proc); it != ix.deaths.end()) first_at_or_after(it->second);
  first_at_or_after(ix.deaths_all);
  if (auto it = ix.first_seen.find(proc); it != ix.first_seen.end()) {
    auto later = it->second.upper_bound(inc);
    if (later != it->second.end() && later->second >= from) t = std::min(t, later->second);
  }
  return t;
}

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

std::vector<FaultWindow> build_faults(const std::vector<Event>& events, std::int64_t run_end) {
  std::vector<FaultWindow> out;
  std::map<std::pair<std::string, std::string>, std::deque<std::size_t>> open;  // (kind, target)
  for (const Event& e : events) {
    if (e.op != "fault") continue;
    if (e.phase == "invoke") {
      const bool instant = is_instant_fault(e.kind);
      if (!instant) open[{e.kind, e.target}].push_back(out.size());
      out.push_back({e.kind, e.target, e.t, instant ? e.t : kNever, e.detail});
    } else if (e.phase == "ok") {
      auto& q = open[{e.kind, e.target}];
      if (q.empty()) continue;
      out[q.front()].end_t = e.t;
      q.pop_front();
    }
  }
  for (FaultWindow& w : out)
    if (w.end_t == kNever) w.end_t = std::max(run_end, w.start_t);  // never healed: lasts the run
  return out;
}

// ---------------------------------------------------------------------------
// Checkers over holds.

std::string explain(const Hold& first, const Hold& second, const std::vector<FaultWindow>& faults) {
  for (const FaultWindow& w : faults) {
    if (!explains_overlap(w.kind)) continue;
    // A server fault (a Redlock node's too) can take the lock from anyone.
    if (w.target != first.proc && w.target != "server" && w.target != "all" && w.target.rfind("node", 0) != 0)
      continue;
    if (w.start_t > second.ok_t || w.end_t < first.ok_t) continue;
    return w.kind + " of " + w.target + " (" + std::to_string(to_ms(w.end_t - w.start_t)) + " ms) during " +
           first.grant + "'s hold";
  }
  return {};
}

// Holds are sorted by ok_t; the active set holds those not yet ended, so the
// sweep costs O(n log n + overlaps).
void find_overlaps(const std::vector<Hold>& holds, const std::vector<FaultWindow>& faults, Findings& f) {
  std::multimap<std::int64_t, std::size_t> active;  // end_t -> hold
  std::int64_t total_ns = 0, max_ns = 0;
  for (std::size_t i = 0; i < holds.size(); ++i) {
    const Hold& h = holds[i];
    while (!active.empty() && active.begin()->first <= h.ok_t) active.erase(active.begin());
    for (const auto& [end_t, j] : active) {
      const Hold& first = holds[j];
      if (first.grant == h.grant) continue;
      Overlap o;
      o.first_grant = first.grant;
      o.second_grant = h.grant;
      o.start_t = h.ok_t;
      o.end_t = std::min(end_t, h.end_t);
      o.explanation = explain(first, h, faults);
      o.explained = !o.explanation.empty();
      if (!o.explained) ++f.unexplained_overlaps;
      total_ns += o.end_t - o.start_t;
      max_ns = std::max(max_ns, o.end_t - o.start_t);
      f.overlaps.push_back(std::move(o));
    }
    if (h.end_t > h.ok_t) active.emplace(h.end_t, i);
  }
  std::stable_sort(f.overlaps.begin(), f.overlaps.end(),
                   [](const Overlap& a, const Overlap& b) { return a.start_t < b.start_t; });
  f.overlap_total_ms = to_ms(total_ns);
  f.overlap_max_ms = to_ms(max_ns);
}

// Writes in the server's order; a write is stale when some earlier-ordered
// write came from a grant whose acquire began after this write's grant was
// given. Tracking the latest such acquire invoke makes it one pass.
void find_stale_writes(const std::vector<Event>& events, const std::string& op,
                       const std::unordered_map<std::string, const Hold*>& by_grant, Findings& f,
                       std::int64_t& count) {
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
void find_fence_anomalies(const std::vector<Hold>& holds, Findings& f) {
  std::vector<const Hold*> by_ok, by_invoke;
  for (const Hold& h : holds)
    if (h.fence != 0) by_ok.push_back(&h);
  by_invoke = by_ok;
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
    auto lo = std::upper_bound(holds.begin(), holds.end(), g.ok_t,
                               [](std::int64_t t, const Hold& h) { return t < h.ok_t; });
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
    auto next = std::upper_bound(holds.begin(), holds.end(), t,
                                 [](std::int64_t x, const Hold& o) { return x < o.ok_t; });
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
      if (a.proc == proc && a.phase.empty() && seen.insert(a.grant).second)
        record(a.grant + " (acquire in flight)", t);
    }
  }
}

// Nearest-rank percentile of sorted values.
std::int64_t percentile(const std::vector<std::int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

void measure_liveness(const Index& ix, const std::vector<Hold>& holds, std::int64_t run_start,
                      std::int64_t run_end, Findings& f) {
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

// ---------------------------------------------------------------------------
// Wing-Gong-Lowe search.

struct ModelOp {
  bool acquire = false;
  int owner = 0;
  std::int64_t call = 0, ret = 0;  // ret kNever: may take effect any time after call
  bool optional = false;           // info: may also never take effect
  std::string label;
};

// A set of 128-bit keys, open addressing; far smaller than a node-based set
// when the search visits millions of states.
class KeySet {
 public:
  bool insert(std::uint64_t a, std::uint64_t b) {
    if (a == 0 && b == 0) a = 1;  // (0, 0) marks an empty slot
    if ((size_ + 1) * 2 > slots_.size()) grow();
    std::size_t mask = slots_.size() - 1;
    for (std::size_t i = static_cast<std::size_t>(a) & mask;; i = (i + 1) & mask) {
      auto& s = slots_[i];
      if (s.first == a && s.second == b) return false;
      if (s.first == 0 && s.second == 0) {
        s = {a, b};
        ++size_;
        return true;
      }
    }
  }
  std::size_t size() const { return size_; }

 private:
  void grow() {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> old(std::max<std::size_t>(1024, slots_.size() * 2));
    old.swap(slots_);
    size_ = 0;
    for (const auto& s : old)
      if (s.first != 0 || s.second != 0) insert(s.first, s.second);
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> slots_;
  std::size_t size_ = 0;
};

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string fmt_ms(std::int64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

std::vector<ModelOp> build_model_ops(const Index& ix, const std::vector<Hold>& holds,
                                     std::vector<std::string>& owners) {
  std::unordered_map<std::string, int> owner_id;
  auto id = [&](const std::string& name) {
    auto [it, fresh] = owner_id.try_emplace(name, static_cast<int>(owners.size()));
    if (fresh) owners.push_back(name);
    return it->second;
  };
  std::vector<ModelOp> ops;
  std::unordered_map<std::string, const Hold*> by_grant;
  for (const Hold& h : holds) {
    by_grant.emplace(h.grant, &h);
    ops.push_back({true, id(h.grant), h.invoke_t, h.ok_t, false, "acquire by " + h.grant});
    // A lease that ended without a release is released by its expiry.
    if (h.end_reason == "lost")
      ops.push_back({false, id(h.grant), h.ok_t, h.end_t, false, "expiry of " + h.grant + " (lost)"});
    else if (h.end_reason == "killed")
      ops.push_back({false, id(h.grant), h.end_t, kNever, true, "expiry of " + h.grant + " (death)"});
  }
  // An acquire of unknown outcome may have taken the lock for an owner that
  // never releases it; the search then only uses it when nothing else is left.
  int unknown = 0;
  for (const AcquireRec& a : ix.acquires) {
    if (a.phase != "info" && !a.phase.empty()) continue;
    const std::string name = a.proc + "/" + std::to_string(a.inc) + "/?" + std::to_string(unknown++);
    ops.push_back({true, id(name), a.invoke_t, kNever, true, "acquire (info) by " + name});
  }
  for (const auto& [grant, rel] : ix.releases) {
    auto it = by_grant.find(grant);
    // A release after the library reported the loss, or of a grant never
    // given, is a no-op by contract; foreign releases are checked apart.
    if (it == by_grant.end() || it->second->end_reason != "release") continue;
    const bool ok = rel.phase == "ok";
    ops.push_back({false, id(grant), rel.invoke_t, ok ? rel.done_t : kNever, !ok, "release by " + grant});
  }
  return ops;
}

}  // namespace

bool explains_overlap(const std::string& kind) {
  return kind == "pause" || kind == "failpoint-pause" || kind == "late-reply" || kind == "server-clock" ||
         kind == "restart" || kind == "failover";
}

ModelResult check_mutex_model(const std::vector<Event>& events, const std::vector<Hold>& holds,
                              std::int64_t max_states) {
  const Index ix = index_events(events);
  std::vector<std::string> owners;
  const std::vector<ModelOp> ops = build_model_ops(ix, holds, owners);
  ModelResult res;
  res.ops_judged = static_cast<std::int64_t>(ops.size());
  const int n = static_cast<int>(ops.size());

  // Entries 2i (call) and 2i+1 (return) in time order, calls before returns
  // at equal times (touching ops count as concurrent), in a doubly linked
  // list with head sentinel 2n; linearizing an op unlinks both its entries.
  const int head = 2 * n;
  std::vector<int> order(static_cast<std::size_t>(2 * n));
  for (int i = 0; i < 2 * n; ++i) order[i] = i;
  auto time_of = [&](int e) { return (e & 1) ? ops[e / 2].ret : ops[e / 2].call; };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (time_of(a) != time_of(b)) return time_of(a) < time_of(b);
    return (a & 1) < (b & 1);
  });
  std::vector<int> next(static_cast<std::size_t>(2 * n + 1)), prev(static_cast<std::size_t>(2 * n + 1));
  int last = head;
  for (int e : order) {
    next[last] = e;
    prev[e] = last;
    last = e;
  }
  next[last] = -1;
  auto unlink = [&](int e) {
    next[prev[e]] = next[e];
    if (next[e] >= 0) prev[next[e]] = prev[e];
  };
  auto relink = [&](int e) {
    next[prev[e]] = e;
    if (next[e] >= 0) prev[next[e]] = e;
  };

  // Zobrist keys: the linearized set is hashed incrementally, 128 bits so a
  // collision (which could only wrongly prune) is practically impossible.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> zob(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    zob[i] = {splitmix64(2 * static_cast<std::uint64_t>(i)), splitmix64(2 * static_cast<std::uint64_t>(i) + 1)};
  std::uint64_t h1 = 0, h2 = 0;

  std::int64_t required_left = 0;
  std::vector<int> releases_left(owners.size(), 0);  // per owner, unlinearized
  for (const ModelOp& op : ops) {
    if (!op.optional) ++required_left;
    if (!op.acquire) ++releases_left[op.owner];
  }

  constexpr int kFree = -1;
  int state = kFree;
  KeySet memo;
  struct Frame {
    int op, state;
  };
  std::vector<Frame> stack;
  std::size_t best_depth = 0;
  int best_op = -1, best_state = kFree;
  bool have_best = false;

  auto apply = [&](int i, int s) -> int {  // new state, or -2 if illegal
    const ModelOp& op = ops[i];
    if (op.acquire) {
      if (s != kFree) return -2;
      // Held by an owner with no release left: nothing required can follow.
      const std::int64_t left_after = required_left - (op.optional ? 0 : 1);
      if (releases_left[op.owner] == 0 && left_after > 0) return -2;
      return op.owner;
    }
    return s == op.owner ? kFree : -2;
  };

  int entry = next[head];
  while (required_left > 0) {
    if (entry < 0) break;  // unreachable: a required op's return stays listed
    const int i = entry / 2;
    if ((entry & 1) == 0) {
      const int ns = apply(i, state);
      if (ns != -2) {
        const std::uint64_t s = splitmix64(static_cast<std::uint64_t>(ns + 2) * 0x10001ULL);
        if (memo.insert(h1 ^ zob[i].first ^ s, h2 ^ zob[i].second ^ (s * 31))) {
          if (static_cast<std::int64_t>(memo.size()) > max_states) {
            res.verdict = "unknown";
            res.detail = "search gave up after " + std::to_string(max_states) + " states (" +
                         std::to_string(stack.size()) + " of " + std::to_string(n) + " ops linearized)";
            return res;
          }
          stack.push_back({i, state});
          state = ns;
          h1 ^= zob[i].first;
          h2 ^= zob[i].second;
          if (!ops[i].optional) --required_left;
          if (!ops[i].acquire) --releases_left[ops[i].owner];
          unlink(2 * i);
          unlink(2 * i + 1);
          entry = next[head];
          continue;
        }
      }
      entry = next[entry];
      continue;
    }
    // The return of an op not linearized: this prefix is a dead end.
    if (!have_best || stack.size() > best_depth) {
      have_best = true;
      best_depth = stack.size();
      best_op = i;
      best_state = state;
    }
    if (stack.empty()) break;
    const Frame f = stack.back();
    stack.pop_back();
    state = f.state;
    h1 ^= zob[f.op].first;
    h2 ^= zob[f.op].second;
    if (!ops[f.op].optional) ++required_left;
    if (!ops[f.op].acquire) ++releases_left[ops[f.op].owner];
    relink(2 * f.op + 1);
    relink(2 * f.op);
    entry = next[2 * f.op];
  }
  if (required_left == 0) {
    res.verdict = "valid";
    return res;
  }
  res.verdict = "invalid";
  if (best_op >= 0) {
    const ModelOp& op = ops[best_op];
    const std::int64_t t0 = ix.first_t;
    const std::string until = op.ret == kNever ? "..." : "t+" + fmt_ms(op.ret - t0);
    const std::string lock = best_state == kFree ? "free" : "held by " + owners[best_state];
    res.detail = op.label + " [t+" + fmt_ms(op.call - t0) + ", " + until + "] cannot take effect: lock " + lock +
                 " after " + std::to_string(best_depth) + " ops linearized";
  }
  return res;
}

Findings analyze(const std::vector<Event>& events, const RunInfo& info) {
  Findings f;
  const Index ix = index_events(events);
  const std::int64_t run_start = info.run_start_t != 0 ? info.run_start_t : ix.first_t;
  const std::int64_t run_end = info.run_end_t != 0 ? info.run_end_t : ix.last_t;

  for (const Event& e : events) {
    OpCounts& c = f.ops[e.op];
    if (e.phase == "invoke") ++c.invoke;
    else if (e.phase == "ok" || e.phase.empty()) ++c.ok;  // phase-less events (failpoint) happened
    else if (e.phase == "fail") ++c.fail;
    else if (e.phase == "info") ++c.info;
    if (e.op == "lost") ++f.losses_notified;
    if (e.op == "fenced_write" && e.phase == "ok") ++f.fenced_accepted;
    if (e.op == "fenced_write" && e.phase == "fail") ++f.fenced_rejected;
    if (e.op == "counter_write" && e.phase == "ok") ++f.counter_acked;
    if (e.op == "final" && e.kind == "counter" && e.value) f.counter_final = e.value;
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

  find_overlaps(f.holds, f.faults, f);
  find_stale_writes(events, "fenced_write", by_grant, f, f.stale_fenced);
  find_stale_writes(events, "unfenced_write", by_grant, f, f.stale_unfenced);
  find_fence_anomalies(f.holds, f);
  find_foreign_releases(ix, f.holds, by_grant, f);
  find_recoveries(ix, f.holds, info, run_end, f);
  measure_liveness(ix, f.holds, run_start, run_end, f);
  f.model = check_mutex_model(events, f.holds);
  return f;
}

Verdict judge(const Findings& f, const Expectation& e) {
  Verdict v;
  std::vector<std::string> forbidden;  // found and not allowed
  auto found = [&](std::string what, bool allowed) {
    if (allowed) what += " (documented: allowed here)";
    else forbidden.push_back(what);
    v.violations.push_back(std::move(what));
    v.caught = true;
  };

  std::int64_t max_unexplained = 0, max_explained = 0;
  for (const Overlap& o : f.overlaps) {
    std::int64_t& m = o.explained ? max_explained : max_unexplained;
    m = std::max(m, to_ms(o.end_t - o.start_t));
  }
  const auto explained = static_cast<std::int64_t>(f.overlaps.size()) - f.unexplained_overlaps;
  if (f.unexplained_overlaps > 0)
    found(plural(f.unexplained_overlaps, "unexplained overlap", "unexplained overlaps") + " (max " +
              std::to_string(max_unexplained) + " ms)",
          false);
  if (explained > 0)
    found(plural(explained, "explained overlap", "explained overlaps") + " (max " + std::to_string(max_explained) +
              " ms)",
          e.overlap_allowed);
  if (f.stale_fenced > 0)
    found(plural(f.stale_fenced, "stale write", "stale writes") + " accepted by the fenced register", false);
  if (!f.foreign_releases.empty())
    found(plural(static_cast<std::int64_t>(f.foreign_releases.size()), "foreign release", "foreign releases"),
          false);
  if (f.lockouts > 0) found(plural(f.lockouts, "lock-out", "lock-outs") + " after a holder's death", false);
  std::int64_t late = 0, late_max = 0;
  for (const Recovery& r : f.recoveries)
    if (r.next_grant_t && !r.within_bound) {
      ++late;
      late_max = std::max(late_max, r.recovery_ms);
    }
  if (late > 0)
    found(plural(late, "recovery", "recoveries") + " past the bound (max " + std::to_string(late_max) + " ms)",
          false);
  // The model sees the same double grants as the overlap check.
  if (f.model.verdict == "invalid") found("mutex model invalid: " + f.model.detail, e.overlap_allowed);
  const std::int64_t anomalies = std::max<std::int64_t>(f.fence_anomaly_count,
                                                        static_cast<std::int64_t>(f.fence_anomalies.size()));
  if (anomalies > 0) found(plural(anomalies, "fence anomaly", "fence anomalies"), e.fence_anomaly_allowed);
  if (f.lost_updates > 0) {
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.1f", f.lost_pct);
    found(plural(f.lost_updates, "lost update", "lost updates") + " (" + pct + "% of acked)",
          e.lost_updates_allowed);
  }

  // Checker health: a run that judged too little proves nothing, unless it
  // is a control that was caught (a lock-out leaves few grants to judge).
  if (f.grants < e.min_grants && !(e.must_be_caught && v.caught))
    v.problems.push_back("checker health: " + plural(f.grants, "grant", "grants") + " judged, need " +
                         std::to_string(e.min_grants));
  const auto faults = static_cast<std::int64_t>(f.faults.size());
  if (faults < e.min_faults)
    v.problems.push_back("checker health: " + plural(faults, "fault", "faults") + " applied, need " +
                         std::to_string(e.min_faults));

  if (e.must_be_caught) {
    if (!v.caught) v.problems.push_back("not caught: this strategy must show a violation here");
  } else {
    for (const std::string& what : forbidden) v.problems.push_back("violation: " + what);
    // "unknown" is never a pass where the model's answer matters.
    if (f.model.verdict == "unknown" && !e.overlap_allowed)
      v.problems.push_back("checker health: mutex model unknown (" + f.model.detail + ")");
  }
  v.pass = v.problems.empty();
  return v;
}

}  // namespace torture

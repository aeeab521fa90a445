#include "analysis_index.hpp"

#include <algorithm>
#include <deque>

namespace torture {

// Pairs acquires with their outcome (a worker's acquires are sequential),
// keeps the first release of each grant, lost notifications, deaths and
// incarnations.
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
        ix.acquires.push_back({e.proc, e.inc, e.t, kNever, "", e.grant, 0, e.kind});
        continue;
      }
      AcquireRec* a = nullptr;
      if (!q.empty()) {
        a = &ix.acquires[q.front()];
        q.pop_front();
      } else {  // outcome without a logged invoke: the invoke is taken as the outcome's time
        ix.acquires.push_back({e.proc, e.inc, e.t, kNever, "", "", 0, e.kind});
        a = &ix.acquires.back();
      }
      a->done_t = e.t;
      a->phase = e.phase;
      if (!e.grant.empty()) a->grant = e.grant;
      a->fence = e.fence.value_or(0);
      if (!e.kind.empty()) a->kind = e.kind;
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

}  // namespace torture

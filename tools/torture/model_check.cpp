// The mutex model check: is there an order of the history's acquires and
// releases, each taking effect between its call and its return, in which
// the lock is never held twice? (Wing-Gong-Lowe search with memoization.)
#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "analysis.hpp"
#include "analysis_index.hpp"

namespace torture {
namespace {

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
  bool insert(std::pair<std::uint64_t, std::uint64_t> key) { return insert(key.first, key.second); }
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

// The search state: ops' call and return entries in time order, in a
// doubly linked list (head sentinel 2n) from which linearizing an op
// unlinks both its entries; the linearized set hashed incrementally
// (Zobrist, 128 bits, so a collision, which could only wrongly prune, is
// practically impossible); a stack to backtrack.
class Search {
 public:
  Search(const std::vector<ModelOp>& ops, std::size_t owners)
      : ops_(ops),
        n_(static_cast<int>(ops.size())),
        head_(2 * n_),
        next_(2 * n_ + 1),
        prev_(2 * n_ + 1),
        zob_(ops.size()),
        releases_left_(owners, 0) {
    link_in_time_order();
    for (int i = 0; i < n_; ++i)
      zob_[i] = {splitmix64(2 * static_cast<std::uint64_t>(i)), splitmix64(2 * static_cast<std::uint64_t>(i) + 1)};
    for (const ModelOp& op : ops_) {
      if (!op.optional) ++required_left_;
      if (!op.acquire) ++releases_left_[op.owner];
    }
  }

  enum class End { valid, invalid, budget };

  // Depth-first over linearization orders: at each step, the next call
  // entry whose op can take effect now; a return entry reached first means
  // that op can no longer take effect in this prefix: backtrack.
  End run(std::int64_t max_states) {
    int entry = next_[head_];
    while (required_left_ > 0) {
      if (entry < 0) break;  // unreachable: a required op's return stays listed
      const int i = entry / 2;
      if ((entry & 1) == 0) {
        const int ns = apply(i, state_);
        if (ns != kIllegal && memo_.insert(key_with(i, ns))) {
          if (static_cast<std::int64_t>(memo_.size()) > max_states) return End::budget;
          linearize(i, ns);
          entry = next_[head_];
          continue;
        }
        entry = next_[entry];
        continue;
      }
      note_dead_end(i);
      if (stack_.empty()) break;
      entry = backtrack();
    }
    return required_left_ == 0 ? End::valid : End::invalid;
  }

  std::size_t depth() const { return stack_.size(); }
  // The deepest dead end: the op that could not take effect, the lock's
  // state there (kFree or an owner) and how many ops were linearized.
  int best_op() const { return best_op_; }
  int best_state() const { return best_state_; }
  std::size_t best_depth() const { return best_depth_; }

  static constexpr int kFree = -1;

 private:
  static constexpr int kIllegal = -2;

  void link_in_time_order() {
    // Calls before returns at equal times: touching ops count as concurrent.
    std::vector<int> order(static_cast<std::size_t>(2 * n_));
    for (int i = 0; i < 2 * n_; ++i) order[i] = i;
    auto time_of = [&](int e) { return (e & 1) ? ops_[e / 2].ret : ops_[e / 2].call; };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      if (time_of(a) != time_of(b)) return time_of(a) < time_of(b);
      return (a & 1) < (b & 1);
    });
    int last = head_;
    for (int e : order) {
      next_[last] = e;
      prev_[e] = last;
      last = e;
    }
    next_[last] = -1;
  }
  void unlink(int e) {
    next_[prev_[e]] = next_[e];
    if (next_[e] >= 0) prev_[next_[e]] = prev_[e];
  }
  void relink(int e) {
    next_[prev_[e]] = e;
    if (next_[e] >= 0) prev_[next_[e]] = e;
  }

  // The state after op i from state s, or kIllegal.
  int apply(int i, int s) const {
    const ModelOp& op = ops_[i];
    if (!op.acquire) return s == op.owner ? kFree : kIllegal;
    if (s != kFree) return kIllegal;
    // Held by an owner with no release left: nothing required can follow.
    const std::int64_t left_after = required_left_ - (op.optional ? 0 : 1);
    if (releases_left_[op.owner] == 0 && left_after > 0) return kIllegal;
    return op.owner;
  }

  std::pair<std::uint64_t, std::uint64_t> key_with(int i, int ns) const {
    const std::uint64_t s = splitmix64(static_cast<std::uint64_t>(ns + 2) * 0x10001ULL);
    return {h1_ ^ zob_[i].first ^ s, h2_ ^ zob_[i].second ^ (s * 31)};  // the state after op i
  }

  void linearize(int i, int ns) {
    stack_.push_back({i, state_});
    state_ = ns;
    h1_ ^= zob_[i].first;
    h2_ ^= zob_[i].second;
    if (!ops_[i].optional) --required_left_;
    if (!ops_[i].acquire) --releases_left_[ops_[i].owner];
    unlink(2 * i);
    unlink(2 * i + 1);
  }

  // Undoes the last linearization; the entry to continue from.
  int backtrack() {
    const Frame f = stack_.back();
    stack_.pop_back();
    state_ = f.state;
    h1_ ^= zob_[f.op].first;
    h2_ ^= zob_[f.op].second;
    if (!ops_[f.op].optional) ++required_left_;
    if (!ops_[f.op].acquire) ++releases_left_[ops_[f.op].owner];
    relink(2 * f.op + 1);
    relink(2 * f.op);
    return next_[2 * f.op];
  }

  void note_dead_end(int i) {
    if (best_op_ >= 0 && stack_.size() <= best_depth_) return;
    best_depth_ = stack_.size();
    best_op_ = i;
    best_state_ = state_;
  }

  struct Frame {
    int op, state;
  };
  const std::vector<ModelOp>& ops_;
  const int n_;
  const int head_;
  std::vector<int> next_, prev_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> zob_;
  std::uint64_t h1_ = 0, h2_ = 0;
  std::int64_t required_left_ = 0;
  std::vector<int> releases_left_;  // per owner, not yet linearized
  int state_ = kFree;
  KeySet memo_;
  std::vector<Frame> stack_;
  std::size_t best_depth_ = 0;
  int best_op_ = -1, best_state_ = kFree;
};

}  // namespace

ModelResult check_mutex_model(const std::vector<Event>& events, const std::vector<Hold>& holds,
                              std::int64_t max_states) {
  const Index ix = index_events(events);
  std::vector<std::string> owners;
  const std::vector<ModelOp> ops = build_model_ops(ix, holds, owners);
  ModelResult res;
  res.ops_judged = static_cast<std::int64_t>(ops.size());
  Search search(ops, owners.size());
  switch (search.run(max_states)) {
    case Search::End::valid:
      res.verdict = "valid";
      return res;
    case Search::End::budget:
      res.verdict = "unknown";
      res.detail = "search gave up after " + std::to_string(max_states) + " states (" + std::to_string(search.depth()) +
                   " of " + std::to_string(ops.size()) + " ops linearized)";
      return res;
    case Search::End::invalid:
      break;
  }
  res.verdict = "invalid";
  if (search.best_op() >= 0) {
    const ModelOp& op = ops[search.best_op()];
    const std::int64_t t0 = ix.first_t;
    const std::string until = op.ret == kNever ? "..." : "t+" + fmt_ms(op.ret - t0);
    const std::string lock = search.best_state() == Search::kFree ? "free" : "held by " + owners[search.best_state()];
    res.detail = op.label + " [t+" + fmt_ms(op.call - t0) + ", " + until + "] cannot take effect: lock " + lock +
                 " after " + std::to_string(search.best_depth()) + " ops linearized";
  }
  return res;
}

}  // namespace torture

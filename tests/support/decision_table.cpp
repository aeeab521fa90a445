#include "support/decision_table.hpp"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dlock::test::table {
namespace {

using detail::AcquireOutcome;
using detail::LockMode;
using detail::ReleaseOutcome;
using detail::RenewOutcome;
using std::chrono::milliseconds;

constexpr int kDefaultLeaseTicks = 600;

const std::map<Op, std::set<std::string>> kOutcomes = {
    {Op::acquire, {"granted", "busy", "lost", "mismatch", "invalid", "refused"}},
    {Op::release, {"released", "not_held", "not_owner", "mismatch"}},
    {Op::abandon, {"ok"}},
    {Op::renew, {"renewed", "expired", "taken"}},
    {Op::inspect, {"ok"}},
};
const std::set<std::string> kNeeds = {"expiry", "replay", "repeat", "tries", "lines", "owners"};

[[noreturn]] void bad(int line, const std::string& why) {
  throw std::runtime_error("locks.table line " + std::to_string(line) + ": " + why);
}

int number(int line, const std::string& s) {
  std::size_t used = 0;
  int n = -1;
  try {
    n = std::stoi(s, &used);
  } catch (const std::exception&) {
  }
  if (used != s.size() || n < 0) bad(line, "'" + s + "' is not a count");
  return n;
}

Op op_of(int line, const std::string& s) {
  static const std::map<std::string, Op> ops = {{"acquire", Op::acquire},
                                                {"release", Op::release},
                                                {"abandon", Op::abandon},
                                                {"renew", Op::renew},
                                                {"inspect", Op::inspect}};
  auto it = ops.find(s);
  if (it == ops.end()) bad(line, "unknown call '" + s + "'");
  return it->second;
}

void read_arg(Step& st, const std::string& arg, bool first) {
  if (first && st.op == Op::acquire) {
    if (arg == "x") return;
    if (arg.empty() || arg[0] != 's') bad(st.line, "acquire needs a mode (x, s or sN), not '" + arg + "'");
    st.mode = LockMode::shared;
    st.queued = true;  // as the client sends every shared call
    if (arg.size() > 1) st.permits = static_cast<unsigned>(number(st.line, arg.substr(1)));
    return;
  }
  if (arg == "queued") return void(st.queued = true);
  if (arg == "line") return void(st.line_abandon = true);
  if (arg == "indoubt") return void(st.in_doubt = true);
  const auto eq = arg.find('=');
  if (eq == std::string::npos) bad(st.line, "unknown word '" + arg + "'");
  const std::string key = arg.substr(0, eq), value = arg.substr(eq + 1);
  if (key == "held")
    st.held = static_cast<unsigned>(number(st.line, value));
  else if (key == "lease")
    st.lease = number(st.line, value);
  else if (key == "tomb")
    st.tomb = number(st.line, value);
  else if (key == "name")
    st.name = value;
  else
    bad(st.line, "unknown argument '" + key + "'");
}

void read_check(Step& st, const std::string& check) {
  for (const char* key : {"depth=", "fence>", "retry<=", "held=", "holders=", "shared=", "waiters="}) {
    const std::string k = key;
    if (check.rfind(k, 0) != 0) continue;
    const std::string value = check.substr(k.size());
    if (k != "fence>") number(st.line, value);
    st.checks[k] = value;
    return;
  }
  bad(st.line, "unknown check '" + check + "'");
}

Step read_step(int line, const std::string& text) {
  Step st;
  st.line = line;
  st.text = text;
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  std::size_t i = 0;
  if (!words.empty() && words[0][0] == '@') st.at = number(line, words[i++].substr(1));
  if (words.size() < i + 4) bad(line, "a step is [@T] WHO OP ARGS... -> OUTCOME");
  st.who = words[i++];
  st.op = op_of(line, words[i++]);
  if ((st.who == "-") != (st.op == Op::inspect)) bad(line, "inspect, and only inspect, has no WHO ('-')");
  bool first = true;
  for (; i < words.size() && words[i] != "->"; ++i, first = false) read_arg(st, words[i], first);
  if (st.op == Op::acquire && first) bad(line, "acquire needs a mode");
  if (i + 1 >= words.size()) bad(line, "no '-> OUTCOME'");
  ++i;
  // inspect always answers (ok): its row may go straight to the checks.
  st.outcome = st.op == Op::inspect && words[i] != "ok" ? "ok" : words[i++];
  if (!kOutcomes.at(st.op).contains(st.outcome)) bad(line, "'" + st.outcome + "' is no outcome of this call");
  for (; i < words.size(); ++i) read_check(st, words[i]);
  return st;
}

// What the steps themselves need, found by following the outcomes they
// expect (see the table's header).
void find_needs(Case& c) {
  std::set<std::string> holding;
  for (const Step& st : c.steps) {
    if (st.at || st.lease || st.tomb) c.needs.insert("expiry");
    if (st.queued || st.mode == LockMode::shared) c.needs.insert("lines");
    if (st.op == Op::release && st.outcome == "not_owner") c.needs.insert("owners");
    if (st.op == Op::acquire) {
      if (st.held)
        c.needs.insert("replay");
      else if (holding.contains(st.who))
        c.needs.insert("repeat");
      if (!st.queued && st.outcome == "busy") c.needs.insert("tries");
      if (st.outcome == "granted") holding.insert(st.who);
    }
    const bool freed = (st.op == Op::release && st.outcome == "released" &&
                        (!st.checks.contains("depth=") || st.checks.at("depth=") == "0")) ||
                       st.op == Op::abandon;
    if (freed) holding.erase(st.who);
  }
}

}  // namespace

std::vector<Case> load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<Case> cases;
  int n = 0;
  for (std::string text; std::getline(in, text);) {
    ++n;
    if (auto hash = text.find('#'); hash != std::string::npos) text.erase(hash);
    text.erase(text.find_last_not_of(" \t") + 1);
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    if (text.rfind("case ", 0) == 0) {
      cases.push_back({n, text.substr(5), {}, {}});
      continue;
    }
    if (cases.empty()) bad(n, "a step before the first case");
    if (text.rfind("needs ", 0) == 0) {
      std::istringstream words(text.substr(6));
      for (std::string w; words >> w;) {
        if (!kNeeds.contains(w)) bad(n, "unknown need '" + w + "'");
        cases.back().needs.insert(w);
      }
      continue;
    }
    cases.back().steps.push_back(read_step(n, text));
  }
  for (Case& c : cases) {
    if (c.steps.empty()) bad(c.line, "case '" + c.title + "' has no steps");
    find_needs(c);
  }
  return cases;
}

const std::vector<Case>& locks_table() {
  static const std::vector<Case> all = load(DLOCK_DECISION_TABLE);
  return all;
}

std::set<std::string> offered(const detail::Capabilities& caps) {
  std::set<std::string> out;
  if (caps.needs_renewal) out.insert("expiry");
  if (caps.server_reentry) out.insert("replay");
  // A hold kept on the server as a lease (renewed) carries its owner and
  // grant there, so the server checks them and answers a repeated grant:
  // Redis in either layout, SQL, Redlock. A session's nodes (ZooKeeper,
  // etcd) are known by their client instead.
  if (caps.server_reentry || caps.needs_renewal) out.insert({"repeat", "owners"});
  if (!caps.always_fair) out.insert("tries");
  if (caps.lines) out.insert("lines");
  return out;
}

namespace {

// One grant of the case, as the runner knows it.
struct Who {
  std::string owner;
  std::uint64_t grant = 0, attempt = 0;
  std::string name;
  LockMode mode = LockMode::exclusive;
  bool line = false;
  unsigned depth = 0;
  std::uint64_t fence = 0;  // 0: never granted
};

std::atomic<std::uint64_t> next_id{1};  // grants and attempts, unique per process

std::string kind_of(AcquireOutcome::Kind k) {
  switch (k) {
    case AcquireOutcome::Kind::granted:
      return "granted";
    case AcquireOutcome::Kind::busy:
      return "busy";
    case AcquireOutcome::Kind::lost:
      return "lost";
    case AcquireOutcome::Kind::mismatch:
      return "mismatch";
  }
  return "?";
}

std::string kind_of(ReleaseOutcome::Kind k) {
  switch (k) {
    case ReleaseOutcome::Kind::released:
      return "released";
    case ReleaseOutcome::Kind::not_held:
      return "not_held";
    case ReleaseOutcome::Kind::not_owner:
      return "not_owner";
    case ReleaseOutcome::Kind::mismatch:
      return "mismatch";
  }
  return "?";
}

std::string kind_of(RenewOutcome k) {
  switch (k) {
    case RenewOutcome::renewed:
      return "renewed";
    case RenewOutcome::expired:
      return "expired";
    case RenewOutcome::taken:
      return "taken";
    case RenewOutcome::wrong_type:
      return "wrong_type";
    case RenewOutcome::unconfirmed:
      return "unconfirmed";
  }
  return "?";
}

std::string error_word(const Status& s) {
  if (s.code() == Errc::invalid_argument) return "invalid";
  if (s.code() == Errc::precondition_failed) return "refused";
  return "error (" + s.to_string() + ")";
}

class Runner {
 public:
  Runner(BackendDriver& d, std::string prefix, milliseconds tick) : d_(d), prefix_(std::move(prefix)), tick_(tick) {}

  std::vector<std::string> run(const Case& c) {
    const auto t0 = std::chrono::steady_clock::now();
    for (const Step& st : c.steps) {
      if (st.at) std::this_thread::sleep_until(t0 + *st.at * tick_);
      const std::size_t before = failures_.size();
      step(st);
      if (failures_.size() > before) break;  // later steps assume this one
    }
    return std::move(failures_);
  }

 private:
  void fail(const Step& st, const std::string& what) {
    failures_.push_back("line " + std::to_string(st.line) + " (" + st.text + "): " + what);
  }
  // The outcome against the row's; false (and a failure) if they differ.
  bool expect(const Step& st, const std::string& got) {
    if (got == st.outcome) return true;
    fail(st, "answered " + got);
    return false;
  }
  void check_count(const Step& st, const char* key, unsigned got) {
    if (auto it = st.checks.find(key); it != st.checks.end() && std::to_string(got) != it->second)
      fail(st, std::string(key) + std::to_string(got));
  }
  milliseconds ticks(std::optional<int> t, int otherwise) const { return t.value_or(otherwise) * tick_; }
  // The lock a step names, unique to this run.
  std::string name_of(const Step& st) const { return prefix_ + "-" + st.name; }

  Who& who(const Step& st) {
    auto [it, fresh] = whos_.try_emplace(st.who);
    Who& w = it->second;
    if (fresh) {
      w.owner = prefix_ + "-" + st.who.substr(0, st.who.find_first_of("0123456789"));
      w.grant = next_id++;
      w.attempt = next_id++;
    }
    return w;
  }
  // A hold (or a place) ended: the next acquire is a new attempt.
  void ended(Who& w) {
    w.depth = 0;
    w.attempt = next_id++;
  }

  void step(const Step& st) {
    switch (st.op) {
      case Op::acquire:
        return acquire(st);
      case Op::release:
        return release(st);
      case Op::abandon:
        return abandon(st);
      case Op::renew:
        return renew(st);
      case Op::inspect:
        return inspect(st);
    }
  }

  void acquire(const Step& st) {
    Who& w = who(st);
    w.name = name_of(st);
    w.mode = st.mode;
    w.line = st.queued;
    detail::AcquireCall call;
    call.name = w.name;
    call.owner = w.owner;
    call.lease = ticks(st.lease, kDefaultLeaseTicks);
    call.held = st.held.value_or(0);
    call.grant = w.grant;
    call.attempt = w.attempt;
    call.mode = st.mode;
    call.permits = st.permits;
    call.queued = st.queued;
    auto r = d_.acquire(call);
    if (!expect(st, r.ok() ? kind_of(r->kind) : error_word(r.status()))) return;
    if (st.outcome == "busy") return check_retry(st, r->hint);
    if (st.outcome != "granted") return;
    w.depth = r->depth;
    check_count(st, "depth=", r->depth);
    check_fence(st, w, r->fence);
  }

  void check_retry(const Step& st, const detail::WaitHint& hint) {
    auto it = st.checks.find("retry<=");
    if (it == st.checks.end()) return;
    if (hint.after.count() <= 0 || hint.after > std::stoi(it->second) * tick_)
      fail(st, "told to retry after " + std::to_string(hint.after.count()) + " ms");
  }

  // A grant answered again keeps its fence; no two grants share one; and
  // fence>WHO holds.
  void check_fence(const Step& st, Who& w, std::uint64_t fence) {
    if (!d_.capabilities().strict_fence) return;
    if (w.fence != 0 && fence != w.fence)
      fail(st, "fence " + std::to_string(fence) + ", was " + std::to_string(w.fence));
    for (const auto& [label, other] : whos_)
      if (&other != &w && other.fence == fence) fail(st, "fence " + std::to_string(fence) + " is " + label + "'s too");
    w.fence = fence;
    if (auto it = st.checks.find("fence>"); it != st.checks.end()) {
      const auto below = whos_.find(it->second);
      if (below == whos_.end() || below->second.fence == 0) return fail(st, it->second + " has no fence to compare");
      if (fence <= below->second.fence)
        fail(st, "fence " + std::to_string(fence) + " not above " + it->second + "'s " +
                     std::to_string(below->second.fence));
    }
  }

  void release(const Step& st) {
    Who& w = who(st);
    detail::ReleaseCall call{w.name.empty() ? name_of(st) : w.name, w.owner, st.held.value_or(std::max(w.depth, 1u)),
                             false};
    call.grant = w.grant;
    call.tombstone = ticks(st.tomb, 0);
    call.mode = w.mode;
    auto r = d_.release(call);
    if (!expect(st, r.ok() ? kind_of(r->kind) : error_word(r.status())) || st.outcome != "released") return;
    check_count(st, "depth=", r->depth);
    w.depth = r->depth;
    if (r->depth == 0) ended(w);
  }

  void abandon(const Step& st) {
    Who& w = who(st);
    detail::AbandonCall call;
    call.name = w.name.empty() ? name_of(st) : w.name;
    call.owner = w.owner;
    call.attempt = w.attempt;
    call.grant = w.grant;
    call.held = st.held.value_or(0);
    call.in_doubt = st.in_doubt;
    call.tombstone = ticks(st.tomb, 0);
    call.mode = w.mode;
    call.line = st.line_abandon || w.line;
    const Status s = d_.abandon(call);
    expect(st, s.ok() ? "ok" : error_word(s));
    ended(w);
  }

  void renew(const Step& st) {
    Who& w = who(st);
    detail::RenewCall call{w.name, w.owner, w.grant, ticks(st.lease, kDefaultLeaseTicks), w.mode, w.line};
    auto r = d_.renew({call});
    if (!r.ok()) return void(expect(st, error_word(r.status())));
    if (r->size() != 1) return fail(st, std::to_string(r->size()) + " outcomes for one renewal");
    expect(st, kind_of(r->front()));
  }

  void inspect(const Step& st) {
    auto r = d_.inspect(name_of(st));
    if (!expect(st, r.ok() ? "ok" : error_word(r.status()))) return;
    check_count(st, "held=", r->held ? 1 : 0);
    check_count(st, "holders=", r->holders);
    check_count(st, "shared=", r->shared ? 1 : 0);
    if (r->waiters) check_count(st, "waiters=", *r->waiters);
  }

  BackendDriver& d_;
  std::string prefix_;
  milliseconds tick_;
  std::map<std::string, Who> whos_;
  std::vector<std::string> failures_;
};

}  // namespace

std::vector<std::string> run(const Case& c, BackendDriver& driver, const std::string& prefix, milliseconds tick) {
  return Runner(driver, prefix, tick).run(c);
}

}  // namespace dlock::test::table

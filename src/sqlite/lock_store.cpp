#include "sqlite/lock_store.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/lock_line.hpp"
#include "core/lock_row.hpp"
#include "sqlite/host.hpp"

namespace dlock::sqlite {
namespace {

using detail::AcquireOutcome;
using detail::LockMode;
using detail::ReleaseOutcome;
using detail::RenewOutcome;

std::string dir_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

// dlock_line's key: owner, grant, kind.
struct LineKey {
  std::string owner;
  std::uint64_t grant = 0;
  int kind = 0;
  auto operator<=>(const LineKey&) const = default;
};

namespace {

// A lease in the table's milliseconds, kept far from overflow.
std::int64_t until(std::int64_t now, milliseconds lease) {
  return now + std::min<std::int64_t>(lease.count(), detail::kNoExpiry / 2);
}

}  // namespace

Result<std::unique_ptr<LockStore>> LockStore::open(const std::string& path, std::chrono::milliseconds busy) {
  if (Status s = check_local_fs(dir_of(path)); !s.ok()) return s;
  if (Status s = check_clock(); !s.ok()) return s;
  for (const std::string& p : {dir_of(path), path})
    if (Status s = check_link_owner(p); !s.ok()) return s;
  std::unique_ptr<LockStore> store(new LockStore(path, busy));
  if (Status s = store->open_file(); !s.ok()) return s;
  return store;
}

Status LockStore::open_file() {
  table_.reset();  // its statements first
  db_.reset();
  auto db = Database::open(path_, busy_);
  if (!db.ok()) return db.status();
  // WAL: readers never block the writer. FULL (a setting of each
  // connection): a granted fence survives a power cut, so fences never repeat.
  if (Status s = (*db)->exec_retrying("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL"); !s.ok()) return s;
  auto table = LockTable::open(**db);
  if (!table.ok()) return table.status();
  db_ = std::move(*db);
  table_ = std::move(*table);
  return {};
}

Status LockStore::follow_file() {
  if (db_ && !db_->has_moved()) return {};
  if (table_) {
    // The old file is still open and readable: which of its locks were ours.
    auto held = table_->held_by(self());
    if (held.ok()) gone_.insert(gone_.end(), held->begin(), held->end());
  }
  return open_file();
}

Result<std::int64_t> LockStore::releases(const std::string& name) {
  if (Status s = follow_file(); !s.ok()) return s;
  return table_->releases(name);
}

// Any error rolls the transaction back (and what it would have told).
template <class T, class F>
Result<T> LockStore::in_transaction(bool* moved, F&& body) {
  if (Status s = follow_file(); !s.ok()) return s;
  pending_ = {};
  WriteTransaction tx(*db_);
  if (Status s = tx.begin(); !s.ok()) return s;
  Result<T> out = body();
  if (!out.ok()) return out;
  if (Status s = tx.commit(); !s.ok()) {
    // Refused before writing (busy): nothing happened. Any other failure of
    // a commit (I/O, disk full) may or may not have made it durable.
    if (s.code() == Errc::unavailable) return s;
    return Status(Errc::outcome_unknown, s.message(), s.backend_code());
  }
  news_.released.insert(news_.released.end(), pending_.released.begin(), pending_.released.end());
  news_.turns.insert(news_.turns.end(), pending_.turns.begin(), pending_.turns.end());
  pending_ = {};
  // Checked after the commit: a file still in place now was in place then
  // (its inode cannot come back to the path while this connection holds it).
  *moved = db_->has_moved();
  return out;
}

// A name's line as the decisions see it (core/lock_line.hpp), with what is
// stored, so that only the difference is written back.
struct LockStore::Line {
  std::optional<StoredRow> row;       // dlock_locks
  detail::LineState state;            // live entries only
  std::map<LineKey, LineRow> stored;  // every dlock_line row of the name
  // The process and client of each holder and waiter: a promoted waiter
  // keeps its own.
  std::map<std::pair<std::string, std::uint64_t>, ProcessId> processes;
  std::map<std::pair<std::string, std::uint64_t>, std::string> clients;
  const ProcessId& process_of(const std::string& owner, std::uint64_t grant) const;
  std::string client_of(const std::string& owner, std::uint64_t grant, const std::string& otherwise) const {
    auto it = clients.find({owner, grant});
    return it != clients.end() ? it->second : otherwise;
  }
  // Read up to a window of waiters (load_line): more wait behind the one
  // with ticket window_end.
  bool truncated = false;
  std::uint64_t window_end = 0;
  bool decided_past_window(const detail::LineState& after) const;
  bool exclusive_live() const {
    return std::any_of(state.holders.begin(), state.holders.end(),
                       [](const auto& h) { return h.mode == LockMode::exclusive; });
  }
};

std::function<std::uint64_t()> LockStore::fence_source(Status* error) {
  return [this, error]() -> std::uint64_t {
    auto f = table_->next_fence();
    if (!f.ok()) {
      *error = f.status();
      return 0;
    }
    return *f;
  };
}

// Rows of another boot, expired, or of a process known dead hold nothing
// (and are deleted by the next write).
Result<LockStore::Line> LockStore::load_line(const std::string& name, std::int64_t now, std::size_t window,
                                             const std::string& owner, std::uint64_t grant) {
  Line l;
  auto row = table_->read(name);
  if (!row.ok()) return row.status();
  l.row = std::move(*row);
  if (const detail::LockRow* live = LockTable::live(l.row, now)) {
    l.state.holders.push_back({live->owner, live->grant, LockMode::exclusive, live->depth, live->fence,
                               live->expires_ms, l.row->info, live->granted_ms});
    l.processes[{live->owner, live->grant}] = l.row->holder;
  }
  auto rows = window == kWholeLine ? table_->read_line(name) : table_->read_line_head(name, window + 1, owner, grant);
  if (!rows.ok()) return rows.status();
  if (window != kWholeLine) {
    // One more than the window was asked for: whether more wait behind.
    std::vector<std::uint64_t> tickets;
    for (const LineRow& r : *rows)
      if (r.kind == LineRow::waiter) tickets.push_back(r.ticket);
    std::sort(tickets.begin(), tickets.end());
    if (tickets.size() > window) {
      l.truncated = true;
      l.window_end = tickets[window - 1];
    }
  }
  std::uint64_t last_ticket = 0;
  bool have_permits = false;
  // Each process looked at once (a /proc read): a line of hundreds of
  // waiters comes from a few processes.
  std::map<std::tuple<pid_t, std::uint64_t, std::string>, bool> dead;
  auto is_dead = [&](const ProcessId& p) {
    auto [it, fresh] = dead.try_emplace({p.pid, p.start, p.ns}, false);
    if (fresh) it->second = known_dead(p);
    return it->second;
  };
  for (LineRow& r : *rows) {
    const bool live = r.boot == boot_id() && r.expires_ms > now && (r.kind == LineRow::tomb || !is_dead(r.process));
    if (live) {
      switch (r.kind) {
        case LineRow::holder:
          l.state.holders.push_back({r.owner, r.grant, r.mode, r.depth, r.fence, r.expires_ms, r.info, r.granted_ms});
          break;
        case LineRow::waiter:
          l.state.line.push_back({r.owner, r.grant, r.mode, r.ticket, r.lease_ms, r.expires_ms, r.info});
          last_ticket = std::max(last_ticket, r.ticket);
          break;
        default:
          l.state.tombs.push_back({r.owner, r.grant, r.expires_ms});
          break;
      }
      if (r.kind != LineRow::tomb) {
        l.processes[{r.owner, r.grant}] = r.process;
        if (!r.client.empty()) l.clients[{r.owner, r.grant}] = r.client;
        if (r.mode == LockMode::shared && !have_permits) {
          l.state.permits = r.permits;
          have_permits = true;
        }
      }
    }
    LineKey key{r.owner, r.grant, r.kind};
    l.stored.emplace(std::move(key), std::move(r));
  }
  std::sort(l.state.line.begin(), l.state.line.end(), [](const auto& a, const auto& b) { return a.ticket < b.ticket; });
  if (l.truncated) {
    auto newest = table_->last_ticket(name);
    if (!newest.ok()) return newest.status();
    last_ticket = std::max(last_ticket, *newest);
  }
  l.state.next_ticket = last_ticket + 1;
  return l;
}

// Everyone of the window gone from the line (granted, given up, dead):
// whoever waits behind it may be next, and was not read.
bool LockStore::Line::decided_past_window(const detail::LineState& after) const {
  if (!truncated) return false;
  return std::none_of(after.line.begin(), after.line.end(), [&](const auto& w) { return w.ticket <= window_end; });
}

template <class Decide>
Result<std::pair<LockStore::Line, detail::LineState>> LockStore::decide_on_line(const std::string& name,
                                                                                std::int64_t now,
                                                                                const std::string& owner,
                                                                                std::uint64_t grant, Decide&& decide) {
  for (const std::size_t window : {kLineWindow, kWholeLine}) {
    auto line = load_line(name, now, window, owner, grant);
    if (!line.ok()) return line.status();
    detail::LineState state = line->state;
    if (Status s = decide(state); !s.ok()) return s;
    if (window == kWholeLine || !line->decided_past_window(state))
      return std::make_pair(std::move(*line), std::move(state));
  }
  return Status(Errc::server_error, "sqlite: unreachable");
}

namespace {

const detail::LineHolder* exclusive_of(const detail::LineState& s) {
  for (const auto& h : s.holders)
    if (h.mode == LockMode::exclusive) return &h;
  return nullptr;
}

bool same_holder(const detail::LineHolder& a, const detail::LineHolder& b) {
  return a.owner == b.owner && a.grant == b.grant && a.depth == b.depth && a.fence == b.fence &&
         a.expires_ms == b.expires_ms && a.info == b.info && a.granted_ms == b.granted_ms;
}

template <class V>
bool has_entry(const V& v, const std::string& owner, std::uint64_t grant) {
  return std::any_of(v.begin(), v.end(), [&](const auto& e) { return e.owner == owner && e.grant == grant; });
}

}  // namespace

const ProcessId& LockStore::Line::process_of(const std::string& owner, std::uint64_t grant) const {
  auto it = processes.find({owner, grant});
  return it != processes.end() ? it->second : self();
}

Status LockStore::store_line(const std::string& name, const Line& before, const detail::LineState& after,
                             const std::vector<detail::Handed>& handed, const std::string& client) {
  auto freed = store_exclusive(name, before, after);
  if (!freed.ok()) return freed.status();
  if (Status s = store_rows(name, before, after, client); !s.ok()) return s;
  // Told to the clients it concerns alone: each recipient of a hand-over,
  // and the waiter now first in line (it looks again by the new holder's
  // lease, in case that one died).
  if (!handed.empty()) {
    std::vector<std::string> told;
    auto tell = [&](const std::string& c) {
      if (c.empty() || std::find(told.begin(), told.end(), c) != told.end()) return;
      told.push_back(c);
      pending_.turns.push_back({name, c, Turn::line});
    };
    for (const auto& h : handed) tell(before.client_of(h.owner, h.grant, {}));
    if (!after.line.empty()) tell(before.client_of(after.line.front().owner, after.line.front().grant, client));
  }
  const bool left = !handed.empty() || someone_left(before.state, after);
  if (left && !*freed)
    if (Status s = table_->count_release(name); !s.ok()) return s;
  if (left || *freed) pending_.released.push_back(name);
  // A line that emptied: a plain waiter behind it is woken (nobody holds).
  if ((left || *freed) && after.holders.empty() && after.line.empty() && before.row && before.row->waiters)
    return wake_next(name, boot_ms()).status();
  return {};
}

// The exclusive holder lives in dlock_locks; freeing it counts a release.
Result<bool> LockStore::store_exclusive(const std::string& name, const Line& before, const detail::LineState& after) {
  const detail::LineHolder* now_ex = exclusive_of(after);
  const detail::LineHolder* was_ex = exclusive_of(before.state);
  if (now_ex == nullptr) {
    if (was_ex == nullptr) return false;
    if (Status s = table_->free(name); !s.ok()) return s;
    return true;
  }
  if (was_ex != nullptr && same_holder(*was_ex, *now_ex)) return false;
  const detail::LockRow row{now_ex->owner, now_ex->grant,      now_ex->depth,
                            now_ex->fence, now_ex->expires_ms, now_ex->granted_ms};
  if (Status s = table_->write(name, row, now_ex->info, &before.process_of(now_ex->owner, now_ex->grant)); !s.ok())
    return s;
  return false;
}

// Everything else lives in dlock_line: only the rows that changed are written.
Status LockStore::store_rows(const std::string& name, const Line& before, const detail::LineState& after,
                             const std::string& client) {
  std::map<LineKey, LineRow> want;
  auto add = [&](int kind, const std::string& owner, std::uint64_t grant) -> LineRow& {
    LineRow& r = want[LineKey{owner, grant, kind}];
    r.kind = kind;
    r.owner = owner;
    r.grant = grant;
    if (kind != LineRow::tomb) {
      r.permits = after.permits;
      r.boot = boot_id();
      r.process = before.process_of(owner, grant);
      // The caller's rows are its client's; others' keep theirs.
      r.client = before.processes.count({owner, grant}) ? before.client_of(owner, grant, {}) : client;
    }
    return r;
  };
  for (const auto& h : after.holders) {
    if (h.mode == LockMode::exclusive) continue;
    LineRow& r = add(LineRow::holder, h.owner, h.grant);
    r.mode = h.mode;
    r.depth = h.depth;
    r.fence = h.fence;
    r.expires_ms = h.expires_ms;
    r.info = h.info;
    r.granted_ms = h.granted_ms;
  }
  for (const auto& w : after.line) {
    LineRow& r = add(LineRow::waiter, w.owner, w.grant);
    r.mode = w.mode;
    r.ticket = w.ticket;
    r.lease_ms = w.lease_ms;
    r.expires_ms = w.expires_ms;
    r.info = w.info;
  }
  for (const auto& t : after.tombs) {
    LineRow& r = add(LineRow::tomb, t.owner, t.grant);
    r.boot = boot_id();
    r.expires_ms = std::max(r.expires_ms, t.until_ms);
  }
  for (const auto& [key, r] : before.stored)
    if (!want.count(key))
      if (Status s = table_->drop_line(name, r.owner, r.grant, r.kind); !s.ok()) return s;
  for (const auto& [key, r] : want) {
    auto it = before.stored.find(key);
    if (it == before.stored.end() || !(it->second == r))
      if (Status s = table_->put_line(name, r); !s.ok()) return s;
  }
  return {};
}

// Anyone gone (released, expired, given up, dead) makes every waiter look
// again; so does a free lock granted, whose holder changed without a
// release, which an observer (Election::observe) must hear of too.
bool LockStore::someone_left(const detail::LineState& before, const detail::LineState& after) {
  for (const auto& h : before.holders)
    if (!has_entry(after.holders, h.owner, h.grant)) return true;
  for (const auto& w : before.line)
    if (!has_entry(after.line, w.owner, w.grant) && !has_entry(after.holders, w.owner, w.grant)) return true;
  return before.holders.empty() && !after.holders.empty();
}

Result<AcquireOutcome> LockStore::acquire(const detail::AcquireCall& call, std::optional<ProcessId>* holder,
                                          const std::string& member) {
  bool moved = false;
  auto out = in_transaction<AcquireOutcome>(&moved, [&]() -> Result<AcquireOutcome> {
    auto stored = table_->read(call.name);
    if (!stored.ok()) return stored.status();
    const std::int64_t now = boot_ms();
    const detail::LockRow* live = LockTable::live(*stored, now);
    // A plain call takes the line's way too when the name has one: it must
    // not pass its shared holders or its waiters.
    bool in_line = call.queued || call.mode == LockMode::shared;
    if (!in_line && live == nullptr) {
      auto any = table_->has_line(call.name);
      if (!any.ok()) return any.status();
      in_line = *any;
    }
    Status fence_error;
    if (in_line) {
      detail::LineAcquire r;
      auto decided = decide_on_line(call.name, now, call.owner, call.grant, [&](detail::LineState& state) {
        r = detail::line_acquire(state, call, now, fence_source(&fence_error));
        return !fence_error.ok() ? fence_error : r.error;
      });
      if (!decided.ok()) return decided.status();
      const auto& [line, state] = *decided;
      const bool line_call = call.queued || call.mode == LockMode::shared;
      if (Status s = store_line(call.name, line, state, r.handed, line_call ? member : std::string()); !s.ok())
        return s;
      const bool busy = r.outcome.kind == AcquireOutcome::Kind::busy;
      if (holder != nullptr && busy && line.exclusive_live()) *holder = line.row->holder;
      // A plain waiter behind a line is woken when the line empties.
      if (busy && !call.queued && call.mode == LockMode::exclusive && !member.empty())
        if (Status s = join(call.name, member, r.outcome.hint.after.count(), call.waited, now); !s.ok()) return s;
      return r.outcome;
    }
    const StoredRow* row = stored->has_value() ? &**stored : nullptr;
    // Kept for the waiter a release woke: only it takes the free lock
    // meanwhile; anyone else waits its turn. One that joined sleeps until
    // its turn comes (or a lease passes: the woken one will hold it that
    // long at most); a try looks again when the reservation ends.
    if (live == nullptr && row != nullptr && !row->woken.empty() && row->woken != member && row->boot == boot_id() &&
        row->woken_until > now && call.held == 0) {
      const milliseconds left(row->woken_until - now);
      if (Status s = join(call.name, member, left.count(), call.waited, now); !s.ok()) return s;
      return AcquireOutcome::busy_with(detail::WaitHint::expiry(member.empty() ? left : std::max(left, call.lease)));
    }
    auto r = detail::decide_acquire(live, call, now, until(now, call.lease), fence_source(&fence_error));
    if (!fence_error.ok()) return fence_error;
    // A fresh grant stores what its holder says of itself; a level keeps it.
    if (r.write)
      if (Status s = table_->write(call.name, *r.write, live == nullptr ? std::string_view(call.info) : row->info);
          !s.ok())
        return s;
    if (r.outcome.kind == AcquireOutcome::Kind::busy) {
      if (holder != nullptr) *holder = row->holder;
      if (Status s = join(call.name, member, r.outcome.hint.after.count(), call.waited, now); !s.ok()) return s;
    } else if (live == nullptr && r.write && row != nullptr && (row->waiters || !row->woken.empty())) {
      // A fresh grant: the caller leaves the waiters, and the row is kept
      // for nobody now.
      if (call.waited && !member.empty())
        if (Status s = table_->leave(call.name, member); !s.ok()) return s;
      if (Status s = table_->clear_woken(call.name); !s.ok()) return s;
    }
    return r.outcome;
  });
  if (moved && out.ok() && out->kind == AcquireOutcome::Kind::granted)
    return Status(Errc::unavailable, "sqlite: the lock file " + path_ + " was deleted or replaced during the grant");
  return out;
}

Result<ReleaseOutcome> LockStore::release_plain(const detail::ReleaseCall& call, std::int64_t now) {
  auto stored = table_->read(call.name);
  if (!stored.ok()) return stored.status();
  auto r = detail::decide_release(LockTable::live(*stored, now), call);
  Status s;
  if (r.write == detail::RowRelease::Write::update) s = table_->write(call.name, r.row, (*stored)->info);
  if (r.write == detail::RowRelease::Write::erase) {
    s = table_->free(call.name);
    pending_.released.push_back(call.name);
    // Its first waiter is woken alone, and the row kept for it.
    if (s.ok() && (*stored)->waiters) s = wake_next(call.name, now).status();
  }
  if (!s.ok()) return s;
  return r.outcome;
}

// A waiter's entry lasts its wait as told (the holder's lease left) and a
// minute more: one whose client is gone is dropped by then.
Status LockStore::join(const std::string& name, const std::string& member, std::int64_t ttl_ms, bool front,
                       std::int64_t now) {
  if (member.empty()) return {};
  return table_->join(name, member, now + std::clamp<std::int64_t>(ttl_ms, 0, detail::kNoExpiry / 4) + 60000, front);
}

Result<bool> LockStore::wake_next(const std::string& name, std::int64_t now) {
  for (int i = 0; i < 16; ++i) {
    auto first = table_->first_waiter(name);
    if (!first.ok()) return first.status();
    if (!*first) break;
    const QueuedWaiter& w = **first;
    if (Status s = table_->drop_waiter(name, w.ticket); !s.ok()) return s;
    if (w.boot != boot_id() || w.expires_ms <= now || known_dead(w.process)) continue;
    if (Status s = table_->reserve(name, w.member, now + kTurnMs); !s.ok()) return s;
    pending_.turns.push_back({name, w.member, Turn::woken});
    auto next = table_->first_waiter(name);
    if (!next.ok()) return next.status();
    if (*next) pending_.turns.push_back({name, (*next)->member, Turn::stand_by});
    return true;
  }
  if (Status s = table_->clear_woken(name); !s.ok()) return s;
  return false;
}

Status LockStore::leave_in_transaction(const std::string& name, const std::string& member, std::int64_t now) {
  if (Status s = table_->leave(name, member); !s.ok()) return s;
  auto stored = table_->read(name);
  if (!stored.ok()) return stored.status();
  if (!*stored || (*stored)->woken != member) return {};
  if (Status s = table_->clear_woken(name); !s.ok()) return s;
  if (LockTable::live(*stored, now) != nullptr) return {};
  auto line = table_->has_line(name);
  if (!line.ok()) return line.status();
  if (*line) return {};
  return wake_next(name, now).status();
}

Status LockStore::leave(const std::string& name, const std::string& member) {
  bool moved = false;
  return in_transaction<bool>(&moved,
                              [&]() -> Result<bool> {
                                if (Status s = leave_in_transaction(name, member, boot_ms()); !s.ok()) return s;
                                return true;
                              })
      .status();
}

Result<ReleaseOutcome> LockStore::release(const detail::ReleaseCall& call) {
  bool moved = false;
  auto out = in_transaction<ReleaseOutcome>(&moved, [&]() -> Result<ReleaseOutcome> {
    const std::int64_t now = boot_ms();
    bool in_line = call.mode == LockMode::shared;
    if (!in_line) {
      auto any = table_->has_line(call.name);
      if (!any.ok()) return any.status();
      in_line = *any;
    }
    if (!in_line) return release_plain(call, now);
    Status fence_error;
    detail::LineRelease r;
    auto decided = decide_on_line(call.name, now, call.owner, call.grant, [&](detail::LineState& state) {
      r = detail::line_release(state, call, now, fence_source(&fence_error));
      return fence_error;
    });
    if (!decided.ok()) return decided.status();
    if (Status s = store_line(call.name, decided->first, decided->second, r.handed); !s.ok()) return s;
    return r.outcome;
  });
  if (moved && out.ok()) return ReleaseOutcome{ReleaseOutcome::Kind::not_held, 0};  // released in a dead file
  return out;
}

Result<bool> LockStore::abandon_needed(const detail::AbandonCall& call) {
  if (call.in_doubt || call.tombstone.count() > 0 || call.waited) return true;
  if (Status s = follow_file(); !s.ok()) return s;
  return table_->touches(call.name, call.owner, call.grant);
}

// Always the line's decision: it removes the caller's place in the line, and
// the level its attempt may have added: a grant whose outcome was unknown,
// or a hand-over it never heard of (which lives in dlock_locks when
// exclusive, where no line row is left to tell the name has a line).
Status LockStore::abandon(const detail::AbandonCall& call, const std::string& member) {
  bool moved = false;
  auto out = in_transaction<bool>(&moved, [&]() -> Result<bool> {
    const std::int64_t now = boot_ms();
    if (call.waited && !member.empty())
      if (Status s = leave_in_transaction(call.name, member, now); !s.ok()) return s;
    Status fence_error;
    std::vector<detail::Handed> handed;
    auto decided = decide_on_line(call.name, now, call.owner, call.grant, [&](detail::LineState& state) {
      handed = detail::line_abandon(state, call, now, fence_source(&fence_error));
      return fence_error;
    });
    if (!decided.ok()) return decided.status();
    if (Status s = store_line(call.name, decided->first, decided->second, handed); !s.ok()) return s;
    return true;
  });
  return out.status();
}

Result<std::vector<RenewOutcome>> LockStore::renew(const std::vector<detail::RenewCall>& calls) {
  bool moved = false;
  auto done = in_transaction<std::vector<RenewOutcome>>(&moved, [&]() -> Result<std::vector<RenewOutcome>> {
    std::vector<RenewOutcome> out;
    const std::int64_t now = boot_ms();
    for (const detail::RenewCall& c : calls) {
      if (c.line) {
        RenewOutcome renewed{};
        auto decided = decide_on_line(c.name, now, c.owner, c.grant, [&](detail::LineState& state) {
          renewed = detail::line_renew(state, c, now);
          return Status();
        });
        if (!decided.ok()) return decided.status();
        out.push_back(renewed);
        if (Status s = store_line(c.name, decided->first, decided->second, {}); !s.ok()) return s;
        continue;
      }
      auto stored = table_->read(c.name);
      if (!stored.ok()) return stored.status();
      out.push_back(detail::decide_renew(LockTable::live(*stored, now), c));
      if (out.back() == RenewOutcome::renewed)
        if (Status s = table_->set_expiry(c.name, until(now, c.lease)); !s.ok()) return s;
    }
    return out;
  });
  if (moved && done.ok())  // extended in a dead file
    for (RenewOutcome& o : *done) o = RenewOutcome::expired;
  return done;
}

Result<std::vector<detail::Handed>> LockStore::holders(const std::string& name) {
  if (Status s = follow_file(); !s.ok()) return s;
  if (Status s = db_->exec("BEGIN"); !s.ok()) return s;  // one snapshot for both tables
  auto line = load_line(name, boot_ms(), kLineWindow);   // every holder, not every waiter
  (void)db_->exec("COMMIT");
  if (!line.ok()) return line.status();
  std::vector<detail::Handed> out;
  for (const auto& h : line->state.holders) out.push_back({h.owner, h.grant, h.fence});
  return out;
}

Result<std::vector<std::string>> LockStore::names(const std::string& prefix) {
  if (Status s = follow_file(); !s.ok()) return s;
  return table_->names(prefix);
}

Result<LockInfo> LockStore::inspect(const std::string& name) {
  if (Status s = follow_file(); !s.ok()) return s;
  // One snapshot for both tables.
  if (Status s = db_->exec("BEGIN"); !s.ok()) return s;
  const std::int64_t now = boot_ms();
  auto line = load_line(name, now);
  auto last = table_->last_fence();
  Result<std::int64_t> waiting = std::int64_t{0};
  if (line.ok() && line->row && line->row->waiters) waiting = table_->count_waiters(name);
  (void)db_->exec("COMMIT");
  if (!line.ok()) return line.status();
  if (!last.ok()) return last.status();
  if (!waiting.ok()) return waiting.status();
  LockInfo info;
  if (!line->stored.empty()) {
    info = detail::line_info(line->state, now);  // its waiters, and plain ones behind it
    if (info.waiters) *info.waiters += static_cast<unsigned>(*waiting);
  } else {
    info.waiters = static_cast<unsigned>(*waiting);  // a plain lock's queue
    if (const detail::LockRow* row = LockTable::live(line->row, now)) {
      info.held = true;
      info.fence = row->fence;
      info.reentry_count = row->depth;
      info.remaining = milliseconds(row->expires_ms - now);
      info.holder = line->row->info;
      info.holders = 1;
      if (row->granted_ms > 0) info.held_for = milliseconds(std::max<std::int64_t>(now - row->granted_ms, 0));
    }
  }
  info.last_fence = *last;
  return info;
}

}  // namespace dlock::sqlite

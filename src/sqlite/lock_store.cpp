#include "sqlite/lock_store.hpp"

#include <algorithm>

#include "core/lock_row.hpp"
#include "sqlite/host.hpp"

namespace dlock::sqlite {
namespace {

using detail::AcquireOutcome;
using detail::ReleaseOutcome;
using detail::RenewOutcome;

std::string dir_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

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

// Any error rolls the transaction back.
template <class T, class F>
Result<T> LockStore::in_transaction(bool* moved, F&& body) {
  if (Status s = follow_file(); !s.ok()) return s;
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
  // Checked after the commit: a file still in place now was in place then
  // (its inode cannot come back to the path while this connection holds it).
  *moved = db_->has_moved();
  return out;
}

Result<AcquireOutcome> LockStore::acquire(const detail::AcquireCall& call, std::optional<ProcessId>* holder) {
  if (Status s = detail::check_mode(call, "SQLite", detail::kNoLines); !s.ok()) return s;
  bool moved = false;
  auto out = in_transaction<AcquireOutcome>(&moved, [&]() -> Result<AcquireOutcome> {
    auto stored = table_->read(call.name);
    if (!stored.ok()) return stored.status();
    const std::int64_t now = boot_ms();
    Status fence_error;
    auto r = detail::decide_acquire(LockTable::live(*stored, now), call, now, until(now, call.lease), [&] {
      auto f = table_->next_fence();
      if (!f.ok()) fence_error = f.status();
      return f.ok() ? *f : 0;
    });
    if (!fence_error.ok()) return fence_error;
    if (r.write)
      if (Status s = table_->write(call.name, *r.write); !s.ok()) return s;
    if (holder != nullptr && r.outcome.kind == AcquireOutcome::Kind::busy) *holder = (*stored)->holder;
    return r.outcome;
  });
  if (moved && out.ok() && out->kind == AcquireOutcome::Kind::granted)
    return Status(Errc::unavailable, "sqlite: the lock file " + path_ + " was deleted or replaced during the grant");
  return out;
}

Result<ReleaseOutcome> LockStore::release(const detail::ReleaseCall& call) {
  bool moved = false;
  auto out = in_transaction<ReleaseOutcome>(&moved, [&]() -> Result<ReleaseOutcome> {
    auto stored = table_->read(call.name);
    if (!stored.ok()) return stored.status();
    auto r = detail::decide_release(LockTable::live(*stored, boot_ms()), call);
    Status s;
    if (r.write == detail::RowRelease::Write::update) s = table_->write(call.name, r.row);
    if (r.write == detail::RowRelease::Write::erase) s = table_->free(call.name);
    if (!s.ok()) return s;
    return r.outcome;
  });
  if (moved && out.ok()) return ReleaseOutcome{ReleaseOutcome::Kind::not_held, 0};  // released in a dead file
  return out;
}

Result<std::vector<RenewOutcome>> LockStore::renew(const std::vector<detail::RenewCall>& calls) {
  bool moved = false;
  auto done = in_transaction<std::vector<RenewOutcome>>(&moved, [&]() -> Result<std::vector<RenewOutcome>> {
    std::vector<RenewOutcome> out;
    const std::int64_t now = boot_ms();
    for (const detail::RenewCall& c : calls) {
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

Result<LockInfo> LockStore::inspect(const std::string& name) {
  if (Status s = follow_file(); !s.ok()) return s;
  auto stored = table_->read(name);
  if (!stored.ok()) return stored.status();
  LockInfo info;
  info.waiters = std::nullopt;  // waiters sleep on a file, uncounted
  const std::int64_t now = boot_ms();
  if (const detail::LockRow* row = LockTable::live(*stored, now)) {
    info.held = true;
    info.fence = row->fence;
    info.reentry_count = row->depth;
    info.remaining = milliseconds(row->expires_ms - now);
  }
  auto last = table_->last_fence();
  if (!last.ok()) return last.status();
  info.last_fence = *last;
  return info;
}

}  // namespace dlock::sqlite

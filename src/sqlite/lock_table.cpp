#include "sqlite/lock_table.hpp"

namespace dlock::sqlite {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS dlock_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS dlock_locks (
  name TEXT PRIMARY KEY,
  owner TEXT,
  grant_id INTEGER NOT NULL DEFAULT 0,
  depth INTEGER NOT NULL DEFAULT 0,
  fence INTEGER NOT NULL DEFAULT 0,
  expires_ms INTEGER NOT NULL DEFAULT 0,
  boot_id TEXT NOT NULL DEFAULT '',
  pid INTEGER NOT NULL DEFAULT 0,
  pid_start INTEGER NOT NULL DEFAULT 0,
  pid_ns TEXT NOT NULL DEFAULT '',
  releases INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT OR IGNORE INTO dlock_meta VALUES ('schema', 1), ('fence', 0);
)sql";

}  // namespace

Result<std::unique_ptr<LockTable>> LockTable::open(Database& db) {
  {
    WriteTransaction tx(db);
    if (Status s = tx.begin(); !s.ok()) return s;
    if (Status s = db.exec_retrying(kSchema); !s.ok()) return s;
    if (Status s = tx.commit(); !s.ok()) return s;
  }
  auto version = db.prepare("SELECT value FROM dlock_meta WHERE key = 'schema'");
  if (!version.ok()) return version.status();
  auto row = version->step();
  if (!row.ok()) return row.status();
  if (!*row || version->int64(0) != kSchemaVersion)
    return Status(Errc::wrong_type, "the lock table has schema version " +
                                        (*row ? std::to_string(version->int64(0)) : std::string("(none)")) +
                                        "; this dlock uses " + std::to_string(kSchemaVersion));
  std::unique_ptr<LockTable> table(new LockTable(db));
  if (Status s = table->prepare_all(); !s.ok()) return s;
  return table;
}

Status LockTable::prepare_all() {
  struct {
    Statement* into;
    const char* sql;
  } const all[] = {
      {&read_,
       "SELECT owner, grant_id, depth, fence, expires_ms, boot_id, pid, pid_start, pid_ns, releases "
       "FROM dlock_locks WHERE name = ?1"},
      {&write_,
       "INSERT INTO dlock_locks (name, owner, grant_id, depth, fence, expires_ms, boot_id, pid, pid_start, pid_ns) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (name) DO UPDATE SET "
       "owner = excluded.owner, grant_id = excluded.grant_id, depth = excluded.depth, fence = excluded.fence, "
       "expires_ms = excluded.expires_ms, boot_id = excluded.boot_id, pid = excluded.pid, "
       "pid_start = excluded.pid_start, pid_ns = excluded.pid_ns"},
      {&expiry_, "UPDATE dlock_locks SET expires_ms = ?2 WHERE name = ?1"},
      {&free_, "UPDATE dlock_locks SET owner = NULL, depth = 0, releases = releases + 1 WHERE name = ?1"},
      {&bump_fence_, "UPDATE dlock_meta SET value = value + 1 WHERE key = 'fence' RETURNING value"},
      {&fence_, "SELECT value FROM dlock_meta WHERE key = 'fence'"},
      {&releases_, "SELECT releases FROM dlock_locks WHERE name = ?1"},
      {&held_by_,
       "SELECT name, owner, grant_id FROM dlock_locks WHERE owner IS NOT NULL AND pid = ?1 AND pid_start = ?2 "
       "AND pid_ns = ?3"},
  };
  for (const auto& s : all) {
    auto st = db_.prepare(s.sql);
    if (!st.ok()) return st.status();
    *s.into = std::move(*st);
  }
  return {};
}

Result<std::optional<StoredRow>> LockTable::read(const std::string& name) {
  read_.bind(1, name);
  auto row = read_.step();
  if (!row.ok()) return row.status();
  std::optional<StoredRow> out;
  if (*row) {
    StoredRow r;
    r.has_owner = !read_.is_null(0);
    r.row.owner = read_.text(0);
    r.row.grant = static_cast<std::uint64_t>(read_.int64(1));
    r.row.depth = static_cast<unsigned>(read_.int64(2));
    r.row.fence = static_cast<std::uint64_t>(read_.int64(3));
    r.row.expires_ms = read_.int64(4);
    r.boot = read_.text(5);
    r.holder.pid = static_cast<pid_t>(read_.int64(6));
    r.holder.start = static_cast<std::uint64_t>(read_.int64(7));
    r.holder.ns = read_.text(8);
    r.releases = read_.int64(9);
    out = std::move(r);
  }
  read_.reset();
  return out;
}

const detail::LockRow* LockTable::live(const std::optional<StoredRow>& stored, std::int64_t now_ms) {
  if (!stored || !stored->has_owner || stored->boot != boot_id() || stored->row.expires_ms <= now_ms) return nullptr;
  if (known_dead(stored->holder)) return nullptr;
  return &stored->row;
}

Status LockTable::write(const std::string& name, const detail::LockRow& row) {
  const ProcessId& me = self();
  write_.bind(1, name)
      .bind(2, row.owner)
      .bind(3, static_cast<std::int64_t>(row.grant))
      .bind(4, static_cast<std::int64_t>(row.depth))
      .bind(5, static_cast<std::int64_t>(row.fence))
      .bind(6, row.expires_ms)
      .bind(7, boot_id())
      .bind(8, static_cast<std::int64_t>(me.pid))
      .bind(9, static_cast<std::int64_t>(me.start))
      .bind(10, me.ns);
  return write_.run();
}

Status LockTable::set_expiry(const std::string& name, std::int64_t expires_ms) {
  expiry_.bind(1, name).bind(2, expires_ms);
  return expiry_.run();
}

Status LockTable::free(const std::string& name) {
  free_.bind(1, name);
  return free_.run();
}

Result<std::uint64_t> LockTable::next_fence() {
  auto row = bump_fence_.step();
  if (!row.ok()) return row.status();
  const auto v = static_cast<std::uint64_t>(bump_fence_.int64(0));
  bump_fence_.reset();
  return v;
}

Result<std::uint64_t> LockTable::last_fence() {
  auto row = fence_.step();
  if (!row.ok()) return row.status();
  const auto v = *row ? static_cast<std::uint64_t>(fence_.int64(0)) : 0;
  fence_.reset();
  return v;
}

Result<std::int64_t> LockTable::releases(const std::string& name) {
  releases_.bind(1, name);
  auto row = releases_.step();
  if (!row.ok()) return row.status();
  const std::int64_t v = *row ? releases_.int64(0) : 0;
  releases_.reset();
  return v;
}

Result<std::vector<detail::HoldRef>> LockTable::held_by(const ProcessId& holder) {
  held_by_.bind(1, static_cast<std::int64_t>(holder.pid))
      .bind(2, static_cast<std::int64_t>(holder.start))
      .bind(3, holder.ns);
  std::vector<detail::HoldRef> out;
  for (;;) {
    auto row = held_by_.step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    out.push_back({held_by_.text(0), held_by_.text(1), static_cast<std::uint64_t>(held_by_.int64(2))});
  }
  held_by_.reset();
  return out;
}

}  // namespace dlock::sqlite

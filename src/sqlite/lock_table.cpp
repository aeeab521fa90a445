#include "sqlite/lock_table.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iterator>

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
  releases INTEGER NOT NULL DEFAULT 0,
  info TEXT NOT NULL DEFAULT '',
  granted_ms INTEGER NOT NULL DEFAULT 0,
  waiters INTEGER NOT NULL DEFAULT 0,
  woken TEXT,
  woken_until INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT OR IGNORE INTO dlock_meta VALUES ('schema', 4), ('fence', 0);
)sql";

// Schema 4: a plain lock's waiters, woken one at a time (lock_table.hpp).
constexpr const char* kWaiters = R"sql(
CREATE TABLE IF NOT EXISTS dlock_waiters (
  name TEXT NOT NULL,
  ticket INTEGER NOT NULL,
  member TEXT NOT NULL,
  expires_ms INTEGER NOT NULL,
  boot_id TEXT NOT NULL,
  pid INTEGER NOT NULL DEFAULT 0,
  pid_start INTEGER NOT NULL DEFAULT 0,
  pid_ns TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (name, ticket)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS dlock_waiters_member ON dlock_waiters (name, member);
CREATE INDEX IF NOT EXISTS dlock_line_ticket ON dlock_line (name, kind, ticket);
)sql";

// Schema 2 beside schema 1: the holder's info, and the table of lines.
constexpr const char* kAddInfo = "ALTER TABLE dlock_locks ADD COLUMN info TEXT NOT NULL DEFAULT ''";
constexpr const char* kLines = R"sql(
CREATE TABLE IF NOT EXISTS dlock_line (
  name TEXT NOT NULL,
  owner TEXT NOT NULL,
  grant_id INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  mode INTEGER NOT NULL DEFAULT 0,
  permits INTEGER NOT NULL DEFAULT 0,
  depth INTEGER NOT NULL DEFAULT 0,
  fence INTEGER NOT NULL DEFAULT 0,
  ticket INTEGER NOT NULL DEFAULT 0,
  lease_ms INTEGER NOT NULL DEFAULT 0,
  expires_ms INTEGER NOT NULL DEFAULT 0,
  info TEXT NOT NULL DEFAULT '',
  boot_id TEXT NOT NULL DEFAULT '',
  pid INTEGER NOT NULL DEFAULT 0,
  pid_start INTEGER NOT NULL DEFAULT 0,
  pid_ns TEXT NOT NULL DEFAULT '',
  granted_ms INTEGER NOT NULL DEFAULT 0,
  client TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (name, owner, grant_id, kind)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS dlock_line_pid ON dlock_line (pid, pid_start) WHERE kind = 0;
)sql";

// A process as three columns from `col` on: pid, its start time, its pid
// namespace (every table names a holder or waiter so).
ProcessId process_at(const Statement& st, int col) {
  ProcessId p;
  p.pid = static_cast<pid_t>(st.int64(col));
  p.start = static_cast<std::uint64_t>(st.int64(col + 1));
  p.ns = st.text(col + 2);
  return p;
}

// The columns of a dlock_line row, in LockTable::rows_of's order.
constexpr const char* kLineColumns =
    "SELECT kind, owner, grant_id, mode, permits, depth, fence, ticket, lease_ms, expires_ms, info, boot_id, pid, "
    "pid_start, pid_ns, granted_ms, client FROM dlock_line WHERE name = ?1";

Result<std::int64_t> schema_version(Database& db) {
  auto version = db.prepare("SELECT value FROM dlock_meta WHERE key = 'schema'");
  if (!version.ok()) return version.status();
  auto row = version->step();
  if (!row.ok()) return row.status();
  return *row ? version->int64(0) : std::int64_t{-1};
}

Result<bool> has_column(Database& db, const char* table, const char* column) {
  auto st = db.prepare(std::string("SELECT 1 FROM pragma_table_info('") + table + "') WHERE name = ?1");
  if (!st.ok()) return st.status();
  st->bind(1, std::string_view(column));
  return st->step();
}

// A column added in place, unless a table made by a newer definition has it.
Status add_column(Database& db, const char* table, const char* column, const char* decl) {
  auto has = has_column(db, table, column);
  if (!has.ok()) return has.status();
  if (*has) return {};
  return db.exec((std::string("ALTER TABLE ") + table + " ADD COLUMN " + column + " " + decl).c_str());
}

// Schema 4 beside schema 3: the waiters' table, the row's own columns, and
// the client of each line row.
Status add_waiters(Database& db) {
  struct {
    const char *table, *column, *decl;
  } const columns[] = {{"dlock_locks", "waiters", "INTEGER NOT NULL DEFAULT 0"},
                       {"dlock_locks", "woken", "TEXT"},
                       {"dlock_locks", "woken_until", "INTEGER NOT NULL DEFAULT 0"},
                       {"dlock_line", "client", "TEXT NOT NULL DEFAULT ''"}};
  for (const auto& c : columns)
    if (Status s = add_column(db, c.table, c.column, c.decl); !s.ok()) return s;
  return db.exec(kWaiters);
}

// Schema 3 beside schema 2: when each holder was granted (for inspect).
Status add_granted(Database& db, const char* table) {
  return add_column(db, table, "granted_ms", "INTEGER NOT NULL DEFAULT 0");
}

// Inside the schema's transaction: schema 1 becomes 2, 2 becomes 3, 3
// becomes 4 (their rows keep working: new columns have defaults, the new
// tables start empty).
Status upgrade(Database& db) {
  auto version = schema_version(db);
  if (!version.ok()) return version.status();
  std::int64_t v = *version;
  if (v == 1) {
    auto info = has_column(db, "dlock_locks", "info");
    if (!info.ok()) return info.status();
    if (!*info)
      if (Status s = db.exec(kAddInfo); !s.ok()) return s;
    if (Status s = db.exec(kLines); !s.ok()) return s;
    if (Status s = db.exec("UPDATE dlock_meta SET value = 2 WHERE key = 'schema'"); !s.ok()) return s;
    v = 2;
  }
  if (v == 2) {
    if (Status s = add_granted(db, "dlock_locks"); !s.ok()) return s;
    if (Status s = add_granted(db, "dlock_line"); !s.ok()) return s;
    if (Status s = db.exec("UPDATE dlock_meta SET value = 3 WHERE key = 'schema'"); !s.ok()) return s;
    v = 3;
  }
  if (v != 3) return {};
  if (Status s = add_waiters(db); !s.ok()) return s;
  return db.exec("UPDATE dlock_meta SET value = 4 WHERE key = 'schema'");
}

// Makes or upgrades the schema, in one write transaction.
Status make_schema(Database& db) {
  WriteTransaction tx(db);
  if (Status s = tx.begin(); !s.ok()) return s;
  if (Status s = db.exec_retrying(kSchema); !s.ok()) return s;
  if (Status s = upgrade(db); !s.ok()) return s;
  auto version = schema_version(db);
  if (!version.ok()) return version.status();
  if (*version != kSchemaVersion)
    return Status(Errc::wrong_type, "the lock table has schema version " +
                                        (*version >= 0 ? std::to_string(*version) : std::string("(none)")) +
                                        "; this dlock uses " + std::to_string(kSchemaVersion));
  if (Status s = db.exec(kLines); !s.ok()) return s;
  if (Status s = db.exec(kWaiters); !s.ok()) return s;
  return tx.commit();
}

bool write_lock_taken(const Status& s) {
  const int rc = std::atoi(s.backend_code().c_str()) & 0xff;
  return !s.ok() && (rc == 5 /* SQLITE_BUSY */ || rc == 6 /* SQLITE_LOCKED */);
}

}  // namespace

Result<std::unique_ptr<LockTable>> LockTable::open(Database& db) {
  // A file of this schema is only read (every table of a version is made
  // with it): a crowd of clients starting at once does not queue on the
  // file's write lock, and none fails to start on "database is locked".
  // Where it must be made, the write lock is asked for briefly, and the
  // schema read again between tries: the crowd's first made it meanwhile.
  const auto busy = db.busy_limit();
  const auto until = std::chrono::steady_clock::now() + busy;
  for (;;) {
    auto current = schema_version(db);
    if (current.ok() && *current == kSchemaVersion) break;
    db.set_busy_limit(std::min(busy, std::chrono::milliseconds(50)));
    const Status made = make_schema(db);
    db.set_busy_limit(busy);
    if (made.ok()) break;
    if (!write_lock_taken(made) || std::chrono::steady_clock::now() >= until) return made;
  }
  std::unique_ptr<LockTable> table(new LockTable(db));
  if (Status s = table->prepare_all(); !s.ok()) return s;
  return table;
}

Status LockTable::prepare_all() {
  struct {
    Statement* into;
    std::string sql;
  } const all[] = {
      {&read_,
       "SELECT owner, grant_id, depth, fence, expires_ms, boot_id, pid, pid_start, pid_ns, releases, info, "
       "granted_ms, waiters, woken, woken_until FROM dlock_locks WHERE name = ?1"},
      {&write_,
       "INSERT INTO dlock_locks (name, owner, grant_id, depth, fence, expires_ms, boot_id, pid, pid_start, pid_ns, "
       "info, granted_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT (name) DO UPDATE "
       "SET owner = excluded.owner, grant_id = excluded.grant_id, depth = excluded.depth, fence = excluded.fence, "
       "expires_ms = excluded.expires_ms, boot_id = excluded.boot_id, pid = excluded.pid, "
       "pid_start = excluded.pid_start, pid_ns = excluded.pid_ns, info = excluded.info, "
       "granted_ms = excluded.granted_ms"},
      {&expiry_, "UPDATE dlock_locks SET expires_ms = ?2 WHERE name = ?1"},
      {&free_, "UPDATE dlock_locks SET owner = NULL, depth = 0, releases = releases + 1 WHERE name = ?1"},
      {&bump_fence_, "UPDATE dlock_meta SET value = value + 1 WHERE key = 'fence' RETURNING value"},
      {&fence_, "SELECT value FROM dlock_meta WHERE key = 'fence'"},
      {&releases_, "SELECT releases FROM dlock_locks WHERE name = ?1"},
      {&held_by_,
       "SELECT name, owner, grant_id FROM dlock_locks WHERE owner IS NOT NULL AND pid = ?1 AND pid_start = ?2 "
       "AND pid_ns = ?3 UNION ALL SELECT name, owner, grant_id FROM dlock_line WHERE kind = 0 AND pid = ?1 "
       "AND pid_start = ?2 AND pid_ns = ?3"},
      {&count_release_,
       "INSERT INTO dlock_locks (name, releases) VALUES (?1, 1) ON CONFLICT (name) DO UPDATE SET "
       "releases = releases + 1"},
      {&has_line_, "SELECT 1 FROM dlock_line WHERE name = ?1 LIMIT 1"},
      {&touches_,
       "SELECT EXISTS (SELECT 1 FROM dlock_line WHERE name = ?1 AND owner = ?2 AND grant_id = ?3) OR EXISTS "
       "(SELECT 1 FROM dlock_locks WHERE name = ?1 AND owner = ?2 AND grant_id = ?3)"},
      {&read_line_, kLineColumns},
      {&read_others_, kLineColumns + std::string(" AND kind IN (0, 2)")},
      {&read_head_, kLineColumns + std::string(" AND kind = 1 ORDER BY ticket LIMIT ?2")},
      {&read_own_, kLineColumns + std::string(" AND kind = 1 AND owner = ?2 AND grant_id = ?3")},
      {&max_ticket_, "SELECT max(ticket) FROM dlock_line WHERE name = ?1 AND kind = 1"},
      {&put_line_,
       "INSERT OR REPLACE INTO dlock_line (name, kind, owner, grant_id, mode, permits, depth, fence, ticket, "
       "lease_ms, expires_ms, info, boot_id, pid, pid_start, pid_ns, granted_ms, client) VALUES (?1, ?2, ?3, ?4, "
       "?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)"},
      {&names_,
       "SELECT name FROM dlock_locks WHERE owner IS NOT NULL AND substr(name, 1, length(?1)) = ?1 UNION "
       "SELECT name FROM dlock_line WHERE kind = 0 AND substr(name, 1, length(?1)) = ?1"},
      {&drop_line_, "DELETE FROM dlock_line WHERE name = ?1 AND owner = ?2 AND grant_id = ?3 AND kind = ?4"},
      // A missed turn (?5) goes back to the front; a waiter already there
      // keeps its place and gets the later expiry, written only when it
      // moves by 10 s or more (so a waiter's look again writes nothing, and
      // its transaction holds the file's write lock for no sync).
      {&join_,
       "INSERT INTO dlock_waiters (name, ticket, member, expires_ms, boot_id, pid, pid_start, pid_ns) VALUES (?1, "
       "CASE WHEN ?5 THEN coalesce((SELECT min(ticket) FROM dlock_waiters WHERE name = ?1), 1) - 1 "
       "ELSE coalesce((SELECT max(ticket) FROM dlock_waiters WHERE name = ?1), 0) + 1 END, ?2, ?3, ?4, ?6, ?7, "
       "?8) ON CONFLICT (name, member) DO UPDATE SET expires_ms = excluded.expires_ms, boot_id = excluded.boot_id "
       "WHERE excluded.expires_ms > expires_ms + 10000 OR excluded.boot_id <> boot_id"},
      {&mark_waiters_,
       "INSERT INTO dlock_locks (name, waiters) VALUES (?1, 1) ON CONFLICT (name) DO UPDATE SET waiters = 1 "
       "WHERE waiters = 0"},
      {&first_waiter_,
       "SELECT ticket, member, expires_ms, boot_id, pid, pid_start, pid_ns FROM dlock_waiters WHERE name = ?1 "
       "ORDER BY ticket LIMIT 1"},
      {&drop_ticket_, "DELETE FROM dlock_waiters WHERE name = ?1 AND ticket = ?2"},
      {&drop_member_, "DELETE FROM dlock_waiters WHERE name = ?1 AND member = ?2"},
      {&count_waiters_, "SELECT count(*) FROM dlock_waiters WHERE name = ?1"},
      {&reserve_, "UPDATE dlock_locks SET woken = ?2, woken_until = ?3, waiters = 1, boot_id = ?4 WHERE name = ?1"},
      {&clear_woken_,
       "UPDATE dlock_locks SET woken = NULL, woken_until = 0, waiters = EXISTS (SELECT 1 FROM dlock_waiters w "
       "WHERE w.name = ?1) WHERE name = ?1"},
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
    r.holder = process_at(read_, 6);
    r.releases = read_.int64(9);
    r.info = read_.text(10);
    r.row.granted_ms = read_.int64(11);
    r.waiters = read_.int64(12) != 0;
    r.woken = read_.text(13);
    r.woken_until = read_.int64(14);
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

Status LockTable::write(const std::string& name, const detail::LockRow& row, std::string_view info,
                        const ProcessId* holder) {
  const ProcessId& me = holder != nullptr ? *holder : self();
  write_.bind(1, name)
      .bind(2, row.owner)
      .bind(3, static_cast<std::int64_t>(row.grant))
      .bind(4, static_cast<std::int64_t>(row.depth))
      .bind(5, static_cast<std::int64_t>(row.fence))
      .bind(6, row.expires_ms)
      .bind(7, boot_id())
      .bind(8, static_cast<std::int64_t>(me.pid))
      .bind(9, static_cast<std::int64_t>(me.start))
      .bind(10, me.ns)
      .bind(11, info)
      .bind(12, row.granted_ms);
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

Status LockTable::count_release(const std::string& name) {
  count_release_.bind(1, name);
  return count_release_.run();
}

Result<bool> LockTable::has_line(const std::string& name) {
  has_line_.bind(1, name);
  auto row = has_line_.step();
  has_line_.reset();
  return row;
}

Result<bool> LockTable::touches(const std::string& name, const std::string& owner, std::uint64_t grant) {
  touches_.bind(1, name).bind(2, owner).bind(3, static_cast<std::int64_t>(grant));
  auto row = touches_.step();
  if (!row.ok()) return row.status();
  const bool any = *row && touches_.int64(0) != 0;
  touches_.reset();
  return any;
}

Result<std::vector<LineRow>> LockTable::rows_of(Statement& st) {
  std::vector<LineRow> out;
  for (;;) {
    auto row = st.step();
    if (!row.ok()) {
      st.reset();
      return row.status();
    }
    if (!*row) break;
    LineRow r;
    r.kind = static_cast<int>(st.int64(0));
    r.owner = st.text(1);
    r.grant = static_cast<std::uint64_t>(st.int64(2));
    r.mode = st.int64(3) != 0 ? detail::LockMode::shared : detail::LockMode::exclusive;
    r.permits = static_cast<unsigned>(st.int64(4));
    r.depth = static_cast<unsigned>(st.int64(5));
    r.fence = static_cast<std::uint64_t>(st.int64(6));
    r.ticket = static_cast<std::uint64_t>(st.int64(7));
    r.lease_ms = st.int64(8);
    r.expires_ms = st.int64(9);
    r.info = st.text(10);
    r.boot = st.text(11);
    r.process = process_at(st, 12);
    r.granted_ms = st.int64(15);
    r.client = st.text(16);
    out.push_back(std::move(r));
  }
  st.reset();
  return out;
}

Result<std::vector<LineRow>> LockTable::read_line(const std::string& name) {
  read_line_.bind(1, name);
  return rows_of(read_line_);
}

Result<std::vector<LineRow>> LockTable::read_line_head(const std::string& name, std::size_t waiters,
                                                       const std::string& owner, std::uint64_t grant) {
  read_others_.bind(1, name);
  auto out = rows_of(read_others_);
  if (!out.ok()) return out;
  read_head_.bind(1, name).bind(2, static_cast<std::int64_t>(waiters));
  auto head = rows_of(read_head_);
  if (!head.ok()) return head.status();
  const bool mine_read = owner.empty() || std::any_of(head->begin(), head->end(), [&](const LineRow& r) {
                           return r.owner == owner && r.grant == grant;
                         });
  out->insert(out->end(), std::make_move_iterator(head->begin()), std::make_move_iterator(head->end()));
  if (mine_read) return out;
  read_own_.bind(1, name).bind(2, owner).bind(3, static_cast<std::int64_t>(grant));
  auto own = rows_of(read_own_);
  if (!own.ok()) return own.status();
  out->insert(out->end(), std::make_move_iterator(own->begin()), std::make_move_iterator(own->end()));
  return out;
}

Result<std::uint64_t> LockTable::last_ticket(const std::string& name) {
  auto n = number_of(max_ticket_, name);
  if (!n.ok()) return n.status();
  return static_cast<std::uint64_t>(std::max<std::int64_t>(*n, 0));
}

Status LockTable::put_line(const std::string& name, const LineRow& r) {
  put_line_.bind(1, name)
      .bind(2, static_cast<std::int64_t>(r.kind))
      .bind(3, r.owner)
      .bind(4, static_cast<std::int64_t>(r.grant))
      .bind(5, static_cast<std::int64_t>(r.mode == detail::LockMode::shared ? 1 : 0))
      .bind(6, static_cast<std::int64_t>(r.permits))
      .bind(7, static_cast<std::int64_t>(r.depth))
      .bind(8, static_cast<std::int64_t>(r.fence))
      .bind(9, static_cast<std::int64_t>(r.ticket))
      .bind(10, r.lease_ms)
      .bind(11, r.expires_ms)
      .bind(12, r.info)
      .bind(13, r.boot)
      .bind(14, static_cast<std::int64_t>(r.process.pid))
      .bind(15, static_cast<std::int64_t>(r.process.start))
      .bind(16, r.process.ns)
      .bind(17, r.granted_ms)
      .bind(18, r.client);
  return put_line_.run();
}

Status LockTable::drop_line(const std::string& name, const std::string& owner, std::uint64_t grant, int kind) {
  drop_line_.bind(1, name)
      .bind(2, owner)
      .bind(3, static_cast<std::int64_t>(grant))
      .bind(4, static_cast<std::int64_t>(kind));
  return drop_line_.run();
}

Result<std::vector<std::string>> LockTable::names(const std::string& prefix) {
  names_.bind(1, prefix);
  std::vector<std::string> out;
  for (;;) {
    auto row = names_.step();
    if (!row.ok()) {
      names_.reset();
      return row.status();
    }
    if (!*row) break;
    out.push_back(names_.text(0));
  }
  names_.reset();
  return out;
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

Status LockTable::join(const std::string& name, const std::string& member, std::int64_t expires_ms, bool front) {
  const ProcessId& me = self();
  join_.bind(1, name)
      .bind(2, member)
      .bind(3, expires_ms)
      .bind(4, boot_id())
      .bind(5, std::int64_t{front ? 1 : 0})
      .bind(6, static_cast<std::int64_t>(me.pid))
      .bind(7, static_cast<std::int64_t>(me.start))
      .bind(8, me.ns);
  if (Status s = join_.run(); !s.ok()) return s;
  mark_waiters_.bind(1, name);
  return mark_waiters_.run();
}

Result<std::optional<QueuedWaiter>> LockTable::first_waiter(const std::string& name) {
  first_waiter_.bind(1, name);
  auto row = first_waiter_.step();
  if (!row.ok()) return row.status();
  std::optional<QueuedWaiter> out;
  if (*row) {
    QueuedWaiter w;
    w.ticket = first_waiter_.int64(0);
    w.member = first_waiter_.text(1);
    w.expires_ms = first_waiter_.int64(2);
    w.boot = first_waiter_.text(3);
    w.process = process_at(first_waiter_, 4);
    out = std::move(w);
  }
  first_waiter_.reset();
  return out;
}

Status LockTable::drop_waiter(const std::string& name, std::int64_t ticket) {
  drop_ticket_.bind(1, name).bind(2, ticket);
  return drop_ticket_.run();
}

Status LockTable::leave(const std::string& name, const std::string& member) {
  drop_member_.bind(1, name).bind(2, member);
  return drop_member_.run();
}

// The one number `st` reads for a name (0 without a row).
Result<std::int64_t> LockTable::number_of(Statement& st, const std::string& name) {
  st.bind(1, name);
  auto row = st.step();
  if (!row.ok()) return row.status();
  const std::int64_t v = *row ? st.int64(0) : 0;
  st.reset();
  return v;
}

Result<std::int64_t> LockTable::count_waiters(const std::string& name) { return number_of(count_waiters_, name); }

Status LockTable::reserve(const std::string& name, const std::string& member, std::int64_t until_ms) {
  reserve_.bind(1, name).bind(2, member).bind(3, until_ms).bind(4, boot_id());
  return reserve_.run();
}

Status LockTable::clear_woken(const std::string& name) {
  clear_woken_.bind(1, name);
  return clear_woken_.run();
}

Result<std::int64_t> LockTable::releases(const std::string& name) { return number_of(releases_, name); }

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

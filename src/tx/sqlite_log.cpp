#include "tx/sqlite_log.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <mutex>
#include <utility>

#include "sqlite/database.hpp"
#include "sqlite/host.hpp"

namespace dlock::tx::detail {
namespace {

using sqlite::Database;
using sqlite::WriteTransaction;

// The log's clock, Unix ms: on one host, the host's. It only dates records
// and schedules recovery; no decision depends on it. Claims run on the
// host's boot clock instead (sqlite::boot_ms(), with the boot's id), as the
// SQLite lock table's leases do: a step of the wall clock lapses none.
#define DLOCK_TX_NOW "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS dlock_tx (
  gid TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT '',
  fence INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  due_ms INTEGER NOT NULL,
  claim_ms INTEGER NOT NULL DEFAULT 0,
  claim_boot TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS dlock_tx_due ON dlock_tx (due_ms)
  WHERE state IN ('trying', 'committing', 'aborting');
CREATE TABLE IF NOT EXISTS dlock_tx_branch (
  gid TEXT NOT NULL,
  branch INTEGER NOT NULL,
  participant TEXT NOT NULL,
  payload BLOB NOT NULL,
  done INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (gid, branch)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS dlock_tx_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
)sql";

std::int64_t as_int(std::uint64_t v) { return static_cast<std::int64_t>(v); }

#define DLOCK_TX_UNFINISHED "state IN ('trying', 'committing', 'aborting')"

// How many of the log's tables (kSchema's) the database holds.
constexpr std::int64_t kLogTables = 3;
Result<std::int64_t> log_tables(Database& db) {
  auto q = db.prepare(
      "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('dlock_tx', 'dlock_tx_branch', "
      "'dlock_tx_meta')");
  if (!q.ok()) return q.status();
  auto row = q->step();
  if (!row.ok()) return row.status();
  const std::int64_t n = *row ? q->int64(0) : 0;
  q->reset();
  return n;
}

// A claim that holds: taken on this boot, lapsing after ?N (now, boot ms).
#define DLOCK_TX_LIVE_CLAIM(now, boot) "(claim_boot = " boot " AND claim_ms > " now ")"

// A log made before claims rode in its records gains their columns (one
// process adds them; another that lost the race finds them there).
Status add_claim_columns(Database& db) {
  for (const char* column : {"claim_ms", "claim_boot"}) {
    auto has = [&]() -> Result<bool> {
      auto q = db.prepare("SELECT count(*) FROM pragma_table_info('dlock_tx') WHERE name = ?1");
      if (!q.ok()) return q.status();
      q->bind(1, std::string_view(column));
      auto row = q->step();
      if (!row.ok()) return row.status();
      const bool there = *row && q->int64(0) == 1;
      q->reset();
      return there;
    };
    auto there = has();
    if (!there.ok()) return there.status();
    if (*there) continue;
    const std::string add =
        std::string("ALTER TABLE dlock_tx ADD COLUMN ") + column +
        (std::string_view(column) == "claim_ms" ? " INTEGER NOT NULL DEFAULT 0" : " TEXT NOT NULL DEFAULT ''");
    Status added = db.exec_retrying(add.c_str());
    if (added.ok()) continue;
    there = has();
    if (!there.ok() || !*there) return added;
  }
  return {};
}

class SqliteLog final : public TxLog {
 public:
  explicit SqliteLog(std::unique_ptr<Database> db) : db_(std::move(db)) {}

  // A write into a log file that was deleted or replaced since it was
  // opened reached no other coordinator (nor this one after a restart):
  // never reported as done.
  static Status moved() {
    return {Errc::unavailable,
            "sqlite: the transaction log file was deleted or replaced while open: this write went to a file no "
            "coordinator will read; reopen the log (and look for what the old file held)"};
  }
  Status commit(WriteTransaction& tx) {
    if (Status s = tx.commit(); !s.ok()) return s;
    if (db_->has_moved()) return moved();
    return {};
  }
  // A write that failed because its file is gone (a statement on the
  // emptied file: "no such table") says so.
  template <class R>
  R said(R r) {
    if (!r.ok() && db_->has_moved()) return moved();
    return r;
  }

  // The log's id: made by whichever process creates the tables first
  // (`create` false: only read).
  Status init_id(bool create) {
    if (create) {
      auto put = db_->prepare("INSERT OR IGNORE INTO dlock_tx_meta (key, value) VALUES ('log_id', ?1)");
      if (!put.ok()) return put.status();
      if (Status s = put->bind(1, new_log_id()).run(); !s.ok()) return s;
    }
    auto get = db_->prepare("SELECT value FROM dlock_tx_meta WHERE key = 'log_id'");
    if (!get.ok()) return get.status();
    auto row = get->step();
    if (!row.ok()) return row.status();
    if (!*row) return {Errc::server_error, "the transaction log has no id"};
    id_ = get->text(0);
    get->reset();
    return {};
  }

  Result<std::uint64_t> create(std::string_view gid, const std::vector<Branch>& branches, milliseconds lease) override {
    std::lock_guard lock(mu_);
    return said(create_locked(gid, branches, lease));
  }
  Result<std::uint64_t> create_locked(std::string_view gid, const std::vector<Branch>& branches, milliseconds lease) {
    if (Status s = full(); !s.ok()) return s;
    WriteTransaction tx(*db_);
    if (Status s = tx.begin(); !s.ok()) return s;
    auto head = db_->prepare(
        "INSERT INTO dlock_tx (gid, state, fence, created_ms, updated_ms, due_ms, claim_ms, claim_boot) VALUES "
        "(?1, 'trying', 1, " DLOCK_TX_NOW ", " DLOCK_TX_NOW ", " DLOCK_TX_NOW
        " + ?2, ?3 + ?2, ?4) ON CONFLICT (gid) "
        "DO NOTHING");
    if (!head.ok()) return head.status();
    Status put = head->bind(1, gid).bind(2, lease.count()).bind(3, sqlite::boot_ms()).bind(4, sqlite::boot_id()).run();
    if (!put.ok()) return put;
    if (db_->changes() != 1)
      return Status(Errc::invalid_argument, "transaction '" + std::string(gid) + "' is already in the log");
    auto row = db_->prepare("INSERT INTO dlock_tx_branch (gid, branch, participant, payload) VALUES (?1, ?2, ?3, ?4)");
    if (!row.ok()) return row.status();
    for (std::size_t i = 0; i < branches.size(); ++i) {
      Status s = row->bind(1, gid)
                     .bind(2, static_cast<std::int64_t>(i))
                     .bind(3, branches[i].participant)
                     .bind(4, branches[i].payload)
                     .run();
      if (!s.ok()) return s;
    }
    if (Status s = commit(tx); !s.ok()) return s;
    return std::uint64_t{1};
  }

  Result<std::optional<std::uint64_t>> claim(std::string_view gid, milliseconds lease) override {
    std::lock_guard lock(mu_);
    if (Status s = full(); !s.ok()) return s;
    WriteTransaction tx(*db_);
    if (Status s = tx.begin(); !s.ok()) return s;
    auto q = db_->prepare(
        "UPDATE dlock_tx SET fence = fence + 1, claim_ms = ?3 + ?2, claim_boot = ?4 WHERE gid = ?1 "
        "AND " DLOCK_TX_UNFINISHED " AND NOT " DLOCK_TX_LIVE_CLAIM("?3", "?4") " RETURNING fence");
    if (!q.ok()) return q.status();
    q->bind(1, gid).bind(2, lease.count()).bind(3, sqlite::boot_ms()).bind(4, sqlite::boot_id());
    auto row = q->step();
    if (!row.ok()) return row.status();
    std::optional<std::uint64_t> fence;
    if (*row) fence = static_cast<std::uint64_t>(q->int64(0));
    q->reset();
    if (Status s = commit(tx); !s.ok()) return s;
    return fence;
  }

  // `by` is not used: the file's busy timeout bounds a write.
  Result<bool> renew(std::string_view gid, std::uint64_t fence, milliseconds lease, Clock::time_point /*by*/) override {
    std::lock_guard lock(mu_);
    if (Status s = full(); !s.ok()) return s;
    auto q = db_->prepare("UPDATE dlock_tx SET claim_ms = ?4 + ?3, due_ms = " DLOCK_TX_NOW
                          " + ?3 WHERE gid = ?1 AND fence = ?2 AND " DLOCK_TX_UNFINISHED
                          " AND " DLOCK_TX_LIVE_CLAIM("?4", "?5"));
    if (!q.ok()) return q.status();
    Status s = q->bind(1, gid)
                   .bind(2, as_int(fence))
                   .bind(3, lease.count())
                   .bind(4, sqlite::boot_ms())
                   .bind(5, sqlite::boot_id())
                   .run();
    if (!s.ok()) return s;
    return db_->changes() == 1;
  }

  Status release(std::string_view gid, std::uint64_t fence) override {
    std::lock_guard lock(mu_);
    auto q = db_->prepare("UPDATE dlock_tx SET claim_ms = 0, due_ms = min(due_ms, " DLOCK_TX_NOW
                          ") WHERE gid = ?1 AND fence = ?2");
    if (!q.ok()) return q.status();
    return q->bind(1, gid).bind(2, as_int(fence)).run();
  }

  // `by` is not used: the file's busy timeout bounds a write.
  Result<bool> move(std::string_view gid, std::uint64_t fence, State from, State to, std::string_view reason,
                    Clock::time_point /*by*/) override {
    std::lock_guard lock(mu_);
    return said(move_locked(gid, fence, from, to, reason));
  }
  Result<bool> move_locked(std::string_view gid, std::uint64_t fence, State from, State to, std::string_view reason) {
    // The end record is not forced to disk (WAL with synchronous NORMAL):
    // lost in a power cut, it leaves the transaction decided, and recovery
    // sends its Confirms or Cancels again, which the barrier makes
    // idempotent. Decisions stay FULL.
    if (!finished(to)) {
      if (Status s = full(); !s.ok()) return s;
      return move_row(gid, fence, from, to, reason);
    }
    full_ = false;
    if (Status s = db_->exec_retrying("PRAGMA synchronous = NORMAL"); !s.ok()) return s;
    auto r = move_row(gid, fence, from, to, reason);
    (void)full();  // if it fails, the next write that must be durable tries again first
    return r;
  }

  // Every write but the end record's is forced to disk.
  Status full() {
    if (full_) return {};
    if (Status s = db_->exec_retrying("PRAGMA synchronous = FULL"); !s.ok()) return s;
    full_ = true;
    return {};
  }

  // move()'s write transaction.
  Result<bool> move_row(std::string_view gid, std::uint64_t fence, State from, State to, std::string_view reason) {
    WriteTransaction tx(*db_);
    if (Status s = tx.begin(); !s.ok()) return s;
    auto r = claim_row(gid, fence, from, to, reason, milliseconds(-1));  // due as it was
    if (!r.ok() || !*r) return r;
    if (finished(to)) {
      auto done = db_->prepare("UPDATE dlock_tx_branch SET done = 1, attempts = 0, last_error = '' WHERE gid = ?1");
      if (!done.ok()) return done.status();
      if (Status s = done->bind(1, gid).run(); !s.ok()) return s;
    }
    if (Status s = commit(tx); !s.ok()) return s;
    return true;
  }

  Result<bool> save(std::string_view gid, std::uint64_t fence, State state, const std::vector<BranchInfo>& branches,
                    milliseconds due_in) override {
    std::lock_guard lock(mu_);
    if (Status s = full(); !s.ok()) return s;
    WriteTransaction tx(*db_);
    if (Status s = tx.begin(); !s.ok()) return s;
    auto r = claim_row(gid, fence, state, state, {}, due_in);
    if (!r.ok() || !*r) return r;
    auto row = db_->prepare(
        "UPDATE dlock_tx_branch SET done = ?3, attempts = ?4, last_error = ?5 WHERE gid = ?1 AND branch = ?2");
    if (!row.ok()) return row.status();
    for (std::size_t i = 0; i < branches.size(); ++i) {
      Status s = row->bind(1, gid)
                     .bind(2, static_cast<std::int64_t>(i))
                     .bind(3, branches[i].done ? 1 : 0)
                     .bind(4, branches[i].attempts)
                     .bind(5, branches[i].last_error)
                     .run();
      if (!s.ok()) return s;
    }
    if (Status s = commit(tx); !s.ok()) return s;
    return true;
  }

  Result<TxInfo> load(std::string_view gid, Clock::time_point /*by*/) override {
    std::lock_guard lock(mu_);
    auto head = db_->prepare("SELECT state, reason, created_ms, updated_ms FROM dlock_tx WHERE gid = ?1");
    if (!head.ok()) return head.status();
    head->bind(1, gid);
    auto row = head->step();
    if (!row.ok()) return row.status();
    if (!*row) return Status(Errc::not_held, "no transaction '" + std::string(gid) + "' in the log");
    TxInfo info;
    info.gid = std::string(gid);
    if (!parse_state(head->text(0), info.state))
      return Status(Errc::wrong_type, "transaction '" + info.gid + "' has an unknown state '" + head->text(0) + "'");
    info.reason = head->text(1);
    info.created_ms = head->int64(2);
    info.updated_ms = head->int64(3);
    head->reset();
    auto rows = db_->prepare(
        "SELECT participant, payload, done, attempts, last_error FROM dlock_tx_branch WHERE gid = ?1 ORDER BY branch");
    if (!rows.ok()) return rows.status();
    rows->bind(1, gid);
    for (;;) {
      auto more = rows->step();
      if (!more.ok()) return more.status();
      if (!*more) break;
      info.branches.push_back(
          {rows->text(0), rows->text(1), rows->int64(2) != 0, static_cast<int>(rows->int64(3)), rows->text(4)});
    }
    rows->reset();
    return info;
  }

  Result<std::vector<std::string>> due(std::size_t limit) override {
    return gids("SELECT gid FROM dlock_tx WHERE " DLOCK_TX_UNFINISHED " AND due_ms <= " DLOCK_TX_NOW
                " ORDER BY due_ms LIMIT ?1",
                limit);
  }

  Result<std::vector<std::string>> unfinished_gids(std::size_t limit) override {
    return gids(
        "SELECT gid FROM dlock_tx WHERE state IN ('trying', 'committing', 'aborting') ORDER BY created_ms, gid "
        "LIMIT ?1",
        limit);
  }

  Status make_due(std::string_view gid) override {
    std::lock_guard lock(mu_);
    // A live claim keeps its due time: a recovery of an earlier version
    // reads only that, and would drive the transaction beside its driver.
    auto q = db_->prepare("UPDATE dlock_tx SET due_ms = CASE WHEN " DLOCK_TX_LIVE_CLAIM(
        "?2", "?3") " THEN due_ms ELSE " DLOCK_TX_NOW " END WHERE gid = ?1 AND " DLOCK_TX_UNFINISHED);
    if (!q.ok()) return q.status();
    if (Status s = q->bind(1, gid).bind(2, sqlite::boot_ms()).bind(3, sqlite::boot_id()).run(); !s.ok()) return s;
    if (db_->changes() != 1) return {Errc::not_held, "no unfinished transaction '" + std::string(gid) + "'"};
    return {};
  }

 private:
  // The first column of `sql` (its ?1 bound to `limit`), every row.
  Result<std::vector<std::string>> gids(const char* sql, std::size_t limit) {
    std::lock_guard lock(mu_);
    auto q = db_->prepare(sql);
    if (!q.ok()) return q.status();
    q->bind(1, static_cast<std::int64_t>(limit));
    std::vector<std::string> out;
    for (;;) {
      auto more = q->step();
      if (!more.ok()) return more.status();
      if (!*more) break;
      out.push_back(q->text(0));
    }
    q->reset();
    return out;
  }

  // The fenced compare-and-set of the transaction's row, inside the caller's
  // write transaction; due `due_in` from now and the claim ended (negative:
  // both unchanged).
  Result<bool> claim_row(std::string_view gid, std::uint64_t fence, State from, State to, std::string_view reason,
                         milliseconds due_in) {
    auto q = db_->prepare(
        "UPDATE dlock_tx SET state = ?3, reason = CASE WHEN ?4 = '' THEN reason ELSE ?4 END, "
        "fence = ?5, updated_ms = " DLOCK_TX_NOW ", due_ms = CASE WHEN ?6 < 0 THEN due_ms ELSE " DLOCK_TX_NOW
        " + ?6 END, claim_ms = CASE WHEN ?6 < 0 THEN claim_ms ELSE 0 END WHERE gid = ?1 AND state = ?2 AND "
        "fence <= ?5");
    if (!q.ok()) return q.status();
    Status s = q->bind(1, gid)
                   .bind(2, state_column(from))
                   .bind(3, state_column(to))
                   .bind(4, reason)
                   .bind(5, as_int(fence))
                   .bind(6, due_in.count())
                   .run();
    if (!s.ok()) return s;
    return db_->changes() == 1;
  }

  std::mutex mu_;
  std::unique_ptr<Database> db_;
  bool full_ = true;  // PRAGMA synchronous is FULL; under mu_
};

}  // namespace

Result<std::unique_ptr<TxLog>> open_sqlite_log(const std::string& path, milliseconds busy, bool create_if_missing) {
  const std::string nothing_made = " (nothing was created)";
  if (!create_if_missing) {
    struct stat st {};
    // A missing file or directory; anything else (no permission...) is
    // left to SQLite to report.
    if (::stat(path.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR))
      return Status(Errc::invalid_argument, "no transaction log at " + path + nothing_made);
  }
  auto db = Database::open(path, busy, create_if_missing);
  if (!db.ok()) return db.status();
  if (!create_if_missing) {
    // Before anything writes: a mistyped path may name another program's
    // database, which must be left as it was (its journal mode included).
    auto tables = log_tables(**db);
    if (!tables.ok()) return tables.status();
    if (*tables == 0) return Status(Errc::invalid_argument, "no transaction log at " + path + nothing_made);
    if (*tables < kLogTables)
      return Status(Errc::invalid_argument, "the transaction log at " + path +
                                                " lacks some of its tables: open it once creating what is "
                                                "missing" +
                                                nothing_made);
  }
  if (Status s = (*db)->exec_retrying("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL"); !s.ok()) return s;
  if (create_if_missing)
    if (Status s = (*db)->exec_retrying(kSchema); !s.ok()) return s;
  // Upgrading a log is not making one: done whether or not `create_if_missing`
  // (a log opened only to be read, from a file that cannot be written, is
  // still read).
  if (Status s = add_claim_columns(**db); !s.ok() && create_if_missing) return s;
  auto log = std::make_unique<SqliteLog>(std::move(*db));
  if (Status s = log->init_id(create_if_missing); !s.ok()) return s;
  return std::unique_ptr<TxLog>(std::move(log));
}

}  // namespace dlock::tx::detail

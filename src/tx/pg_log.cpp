#include "tx/pg_log.hpp"

#include <utility>

#include "dlock/client.hpp"
#include "postgres/pg_blocking.hpp"
#include "postgres/url.hpp"
#include "tx/group_commit.hpp"
#include "tx/pg_pool.hpp"

namespace dlock::tx::detail {
namespace {

using postgres::Rows;

// Replaces every @S with the schema.
std::string in_schema(std::string sql, const std::string& schema) {
  for (auto at = sql.find("@S"); at != std::string::npos; at = sql.find("@S", at + schema.size()))
    sql.replace(at, 2, schema);
  return sql;
}

constexpr const char* kSchema = R"sql(
DO $do$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('dlock tx schema @S'));
  CREATE TABLE IF NOT EXISTS @S.dlock_tx (
    gid text PRIMARY KEY,
    state text NOT NULL,
    reason text NOT NULL DEFAULT '',
    fence bigint NOT NULL,
    created_ms bigint NOT NULL,
    updated_ms bigint NOT NULL,
    due_ms bigint NOT NULL,
    claim_ms bigint NOT NULL DEFAULT 0
  );
  CREATE INDEX IF NOT EXISTS dlock_tx_due ON @S.dlock_tx (due_ms)
    WHERE state IN ('trying', 'committing', 'aborting');
  CREATE TABLE IF NOT EXISTS @S.dlock_tx_branch (
    gid text NOT NULL,
    branch int NOT NULL,
    participant text NOT NULL,
    payload bytea NOT NULL,
    done boolean NOT NULL DEFAULT false,
    attempts int NOT NULL DEFAULT 0,
    last_error text NOT NULL DEFAULT '',
    PRIMARY KEY (gid, branch)
  );
  CREATE TABLE IF NOT EXISTS @S.dlock_tx_meta (key text PRIMARY KEY, value text NOT NULL);
END
$do$)sql";

// A log made before claims rode in its records gains their column. Looked
// for first, without a lock: ALTER TABLE would lock the table even with IF
// NOT EXISTS.
constexpr const char* kClaimColumn = R"sql(
DO $do$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '@S.dlock_tx'::regclass AND attname = 'claim_ms'
                 AND NOT attisdropped) THEN
    PERFORM pg_advisory_xact_lock(hashtext('dlock tx schema @S'));
    ALTER TABLE @S.dlock_tx ADD COLUMN IF NOT EXISTS claim_ms bigint NOT NULL DEFAULT 0;
  END IF;
END
$do$)sql";

// The server's clock in Unix ms: it dates records and schedules recovery
// alike for every coordinator; no decision depends on it.
#define DLOCK_TX_PG_NOW "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
// Unreferenced SELECT CTEs do not run: each write joins this one, so the
// commit of its transaction waits for the WAL flush whatever the role's
// synchronous_commit says (a decision lost in a crash would be undone).
#define DLOCK_TX_PG_SYNC "sc AS (SELECT set_config('synchronous_commit', 'on', true) AS v)"

#define DLOCK_TX_PG_UNFINISHED "state IN ('trying', 'committing', 'aborting')"

// The record and its claim (fence 1, until $2 ms from now) in one write.
constexpr const char* kCreate =
    "WITH " DLOCK_TX_PG_SYNC
    ", g AS (INSERT INTO @S.dlock_tx (gid, state, fence, created_ms, updated_ms, due_ms, claim_ms) "
    "SELECT $1, 'trying', 1, t.n, t.n, t.n + $2::bigint, t.n + $2::bigint FROM sc, (SELECT " DLOCK_TX_PG_NOW
    " AS n) t ON CONFLICT (gid) DO NOTHING RETURNING gid), "
    "b AS (INSERT INTO @S.dlock_tx_branch (gid, branch, participant, payload) "
    "SELECT g.gid, (e.ord - 1)::int, e.v->>'p', decode(e.v->>'d', 'hex') "
    "FROM g, jsonb_array_elements($3::jsonb) WITH ORDINALITY AS e(v, ord)) "
    "SELECT count(*) FROM g";

// A takeover: durable, so that a crash of the server cannot hand the same
// fence out twice.
constexpr const char* kClaim =
    "WITH " DLOCK_TX_PG_SYNC ", c AS (UPDATE @S.dlock_tx SET fence = fence + 1, claim_ms = " DLOCK_TX_PG_NOW
    " + $2::bigint WHERE gid = $1 AND " DLOCK_TX_PG_UNFINISHED " AND claim_ms <= " DLOCK_TX_PG_NOW
    " AND (SELECT v IS NOT NULL FROM sc) RETURNING fence) SELECT fence FROM c";

// Durable too: a renewal lost in a crash would let recovery take over a
// transaction whose driver still counts on the renewal.
constexpr const char* kRenew =
    "WITH " DLOCK_TX_PG_SYNC ", r AS (UPDATE @S.dlock_tx SET claim_ms = " DLOCK_TX_PG_NOW
    " + $3::bigint, due_ms = " DLOCK_TX_PG_NOW
    " + $3::bigint WHERE gid = $1 AND fence = $2::bigint AND " DLOCK_TX_PG_UNFINISHED " AND claim_ms > " DLOCK_TX_PG_NOW
    " AND (SELECT v IS NOT NULL FROM sc) RETURNING gid) "
    "SELECT count(*) FROM r";

// Not forced to disk: a release lost in a crash only delays recovery until
// the claim lapses.
constexpr const char* kRelease = "UPDATE @S.dlock_tx SET claim_ms = 0, due_ms = least(due_ms, " DLOCK_TX_PG_NOW
                                 ") WHERE gid = $1 AND fence = $2::bigint";

// $7: 'on' for a decision (forced to disk whatever the role's
// synchronous_commit says), 'off' for the end record: lost in a crash, it
// leaves the transaction decided, and recovery sends its Confirms (or
// Cancels, or COMMIT PREPARED) again, which the barrier and PostgreSQL's
// prepared transactions make idempotent.
constexpr const char* kMove =
    "WITH sc AS (SELECT set_config('synchronous_commit', $7, true) AS v), m AS (UPDATE @S.dlock_tx SET state = $3, "
    "reason = CASE WHEN $4 = '' THEN reason ELSE $4 "
    "END, fence = $5::bigint, updated_ms = " DLOCK_TX_PG_NOW
    " WHERE gid = $1 AND state = $2 AND fence <= $5::bigint AND (SELECT v IS NOT NULL FROM sc) "
    "RETURNING gid), "
    "b AS (UPDATE @S.dlock_tx_branch SET done = true, attempts = 0, last_error = '' "
    "WHERE $6::boolean AND gid IN (SELECT gid FROM m)) "
    "SELECT count(*) FROM m";

constexpr const char* kSave =
    "WITH " DLOCK_TX_PG_SYNC ", m AS (UPDATE @S.dlock_tx SET fence = $3::bigint, updated_ms = " DLOCK_TX_PG_NOW
    ", due_ms = " DLOCK_TX_PG_NOW
    " + $4::bigint, claim_ms = 0 WHERE gid = $1 AND state = $2 AND fence <= $3::bigint AND (SELECT v IS NOT "
    "NULL FROM sc) RETURNING gid), "
    "b AS (UPDATE @S.dlock_tx_branch AS t SET done = (e.v->>'done')::boolean, attempts = "
    "(e.v->>'a')::int, last_error = e.v->>'e' FROM m, jsonb_array_elements($5::jsonb) WITH "
    "ORDINALITY AS e(v, ord) WHERE t.gid = m.gid AND t.branch = e.ord - 1) "
    "SELECT count(*) FROM m";

// How many of the log's tables (kSchema's) are there.
constexpr const char* kLogTables =
    "SELECT (to_regclass('@S.dlock_tx') IS NOT NULL)::int + (to_regclass('@S.dlock_tx_branch') IS NOT NULL)::int + "
    "(to_regclass('@S.dlock_tx_meta') IS NOT NULL)::int";

constexpr const char* kHead = "SELECT state, reason, created_ms, updated_ms FROM @S.dlock_tx WHERE gid = $1";
constexpr const char* kBranches =
    "SELECT participant, encode(payload, 'hex'), done, attempts, last_error FROM @S.dlock_tx_branch WHERE gid = $1 "
    "ORDER BY branch";
constexpr const char* kDue = "SELECT gid FROM @S.dlock_tx WHERE " DLOCK_TX_PG_UNFINISHED
                             " AND due_ms <= " DLOCK_TX_PG_NOW " ORDER BY due_ms LIMIT $1::bigint";
constexpr const char* kUnfinished =
    "SELECT gid FROM @S.dlock_tx WHERE state IN ('trying', 'committing', 'aborting') "
    "ORDER BY created_ms, gid LIMIT $1::bigint";
// A live claim keeps its due time: a recovery of an earlier version reads
// only that, and would drive the transaction beside its driver.
constexpr const char* kMakeDue =
    "UPDATE @S.dlock_tx SET due_ms = CASE WHEN claim_ms > " DLOCK_TX_PG_NOW " THEN due_ms ELSE " DLOCK_TX_PG_NOW
    " END WHERE gid = $1 AND " DLOCK_TX_PG_UNFINISHED " RETURNING gid";

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

std::string unhex(std::string_view text) {
  auto digit = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  for (std::size_t i = 0; i + 1 < text.size(); i += 2)
    out += static_cast<char>(digit(text[i]) * 16 + digit(text[i + 1]));
  return out;
}

// A JSON string of `text` (jsonb refuses \u0000: a NUL becomes '?').
std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == 0) {
      out += '?';
    } else if (c < 0x20) {
      static constexpr char kDigits[] = "0123456789abcdef";
      out += "\\u00";
      out += kDigits[c >> 4];
      out += kDigits[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Connections to the log at once, per coordinator: concurrent writes
// commit together, and a burst stays within the server's max_connections.
constexpr std::size_t kMaxConnections = 4;

std::string count_of(const Rows& rows) { return rows.empty() || rows[0].empty() ? "" : rows[0][0].value_or(""); }

// Batches of the log's writes in flight at once, and writes in one.
constexpr std::size_t kBatchesInFlight = 1;
constexpr std::size_t kMaxBatch = 64;

// Last in a batch with a write forced to disk: each write sets
// synchronous_commit for its own transaction, and in a batch the last
// setting is the commit's.
constexpr const char* kSyncOn = "SELECT set_config('synchronous_commit', 'on', true)";

class PgLog final : public TxLog {
 public:
  PgLog(postgres::PgConfig config, std::string schema)
      : pool_(std::move(config), kMaxConnections),
        schema_(std::move(schema)),
        create_sql_(in_schema(kCreate, schema_)),
        move_sql_(in_schema(kMove, schema_)),
        group_(
            kBatchesInFlight, kMaxBatch,
            [this](const std::vector<const GroupCommit::Write*>& writes, Clock::time_point by) {
              return write_batch(writes, by);
            },
            [this](const GroupCommit::Write& w) { return pool_.take()->exec_prepared(*w.sql, w.params, w.by); }) {}

  // Creates the tables unless they are there and reads (or makes) the log's
  // id; `create` false: only checks that the tables are there and reads the
  // id, creating nothing. `where` names the log in messages.
  Status init(bool create, const std::string& where) {
    if (!create) {
      auto r = exec(kLogTables, {});
      if (!r.ok()) return r.status();
      const std::string tables = count_of(*r);
      const std::string nothing_made = " (nothing was created)";
      if (tables == "0") return {Errc::invalid_argument, "no transaction log at " + where + nothing_made};
      if (tables != "3")
        return {Errc::invalid_argument, "the transaction log at " + where +
                                            " lacks some of its tables: open it once creating what is missing" +
                                            nothing_made};
      auto id = exec("SELECT value FROM @S.dlock_tx_meta WHERE key = 'log_id'", {});
      if (!id.ok()) return id.status();
      if (id->empty() || id->front().empty() || !id->front()[0]) return {Errc::server_error, "the log has no id"};
      id_ = *id->front()[0];
      // Upgrading a log is not making one. A role that may only read it
      // still reads it: writes are refused by the server then.
      (void)exec(kClaimColumn, {});
      return {};
    }
    auto r = exec(kSchema, {});
    if (!r.ok()) return r.status();
    if (auto c = exec(kClaimColumn, {}); !c.ok()) return c.status();
    // The log's id: made by whichever process gets there first. When
    // another's insert was in flight, ours waited for it and did nothing,
    // while the statement's snapshot predates its row: asked again, it is
    // there.
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto id = exec(
          "WITH put AS (INSERT INTO @S.dlock_tx_meta (key, value) VALUES ('log_id', $1) ON "
          "CONFLICT (key) DO NOTHING RETURNING value) SELECT value FROM put UNION ALL "
          "SELECT value FROM @S.dlock_tx_meta WHERE key = 'log_id'",
          {new_log_id()});
      if (!id.ok()) return id.status();
      if (!id->empty() && !id->front().empty() && id->front()[0]) {
        id_ = *id->front()[0];
        return {};
      }
    }
    return {Errc::server_error, "the log has no id"};
  }

  Result<std::uint64_t> create(std::string_view gid, const std::vector<Branch>& branches, milliseconds lease) override {
    std::string json = "[";
    for (const auto& b : branches)
      json += (json.size() > 1 ? "," : "") + std::string("{\"p\":") + json_string(b.participant) + ",\"d\":\"" +
              hex(b.payload) + "\"}";
    json += "]";
    auto r = group_.write({&create_sql_, {std::string(gid), std::to_string(lease.count()), json}});
    if (!r.ok()) return r.status();
    if (count_of(*r) != "1")
      return Status(Errc::invalid_argument, "transaction '" + std::string(gid) + "' is already in the log");
    return std::uint64_t{1};
  }

  Result<std::optional<std::uint64_t>> claim(std::string_view gid, milliseconds lease) override {
    auto r = run(kClaim, {std::string(gid), std::to_string(lease.count())});
    if (!r.ok()) return r.status();
    const std::string fence = count_of(*r);
    if (fence.empty()) return std::optional<std::uint64_t>();
    return std::optional<std::uint64_t>(std::stoull(fence));
  }

  Result<bool> renew(std::string_view gid, std::uint64_t fence, milliseconds lease, Clock::time_point by) override {
    auto r = run(kRenew, {std::string(gid), std::to_string(fence), std::to_string(lease.count())}, by);
    if (!r.ok()) return r.status();
    return count_of(*r) == "1";
  }

  Status release(std::string_view gid, std::uint64_t fence) override {
    return run(kRelease, {std::string(gid), std::to_string(fence)}).status();
  }

  Result<bool> move(std::string_view gid, std::uint64_t fence, State from, State to, std::string_view reason,
                    Clock::time_point by) override {
    auto r = group_.write(
        {&move_sql_,
         {std::string(gid), std::string(state_column(from)), std::string(state_column(to)), std::string(reason),
          std::to_string(fence), finished(to) ? "true" : "false", finished(to) ? "off" : "on"},
         by,
         !finished(to)});
    if (!r.ok()) return r.status();
    return count_of(*r) == "1";
  }

  Result<bool> save(std::string_view gid, std::uint64_t fence, State state, const std::vector<BranchInfo>& branches,
                    milliseconds due_in) override {
    std::string json = "[";
    for (const auto& b : branches)
      json += (json.size() > 1 ? "," : "") + std::string("{\"done\":") + (b.done ? "true" : "false") +
              ",\"a\":" + std::to_string(b.attempts) + ",\"e\":" + json_string(b.last_error) + "}";
    json += "]";
    auto r = run(kSave, {std::string(gid), std::string(state_column(state)), std::to_string(fence),
                         std::to_string(due_in.count()), json});
    if (!r.ok()) return r.status();
    return count_of(*r) == "1";
  }

  Result<TxInfo> load(std::string_view gid, Clock::time_point by) override {
    auto head = run(kHead, {std::string(gid)}, by);
    if (!head.ok()) return head.status();
    if (head->empty()) return Status(Errc::not_held, "no transaction '" + std::string(gid) + "' in the log");
    const auto& h = (*head)[0];
    TxInfo info;
    info.gid = std::string(gid);
    if (!parse_state(h[0].value_or(""), info.state))
      return Status(Errc::wrong_type, "transaction '" + info.gid + "' has an unknown state");
    info.reason = h[1].value_or("");
    info.created_ms = std::stoll(h[2].value_or("0"));
    info.updated_ms = std::stoll(h[3].value_or("0"));
    auto rows = run(kBranches, {std::string(gid)}, by);
    if (!rows.ok()) return rows.status();
    for (const auto& r : *rows)
      info.branches.push_back({r[0].value_or(""), unhex(r[1].value_or("")), r[2].value_or("f") == "t",
                               std::stoi(r[3].value_or("0")), r[4].value_or("")});
    return info;
  }

  Result<std::vector<std::string>> due(std::size_t limit) override { return gids(kDue, limit); }

  Result<std::vector<std::string>> unfinished_gids(std::size_t limit) override { return gids(kUnfinished, limit); }

  Status make_due(std::string_view gid) override {
    auto r = run(kMakeDue, {std::string(gid)});
    if (!r.ok()) return r.status();
    if (r->empty()) return {Errc::not_held, "no unfinished transaction '" + std::string(gid) + "'"};
    return {};
  }

 private:
  // On a pooled connection: concurrent transactions' writes commit
  // together instead of queueing on one connection.
  Result<Rows> exec(const std::string& sql, const std::vector<std::string>& params,
                    Clock::time_point by = Clock::time_point::max()) {
    return pool_.take()->exec(in_schema(sql, schema_), params, by);
  }
  // exec() for the statements every transaction sends: prepared once per
  // connection (their CTEs cost more to plan than to run).
  Result<Rows> run(const std::string& sql, const std::vector<std::string>& params,
                   Clock::time_point by = Clock::time_point::max()) {
    return pool_.take()->exec_prepared(in_schema(sql, schema_), params, by);
  }
  Result<std::vector<std::string>> gids(const char* sql, std::size_t limit) {
    auto r = run(sql, {std::to_string(limit)});
    if (!r.ok()) return r.status();
    std::vector<std::string> out;
    for (const auto& row : *r) out.push_back(row[0].value_or(""));
    return out;
  }

  // Several transactions' creates and moves in one commit (GroupCommit).
  Result<std::vector<Rows>> write_batch(const std::vector<const GroupCommit::Write*>& writes, Clock::time_point by) {
    static const std::string sync_on = kSyncOn;
    static const std::vector<std::string> none;
    std::vector<postgres::PgBlocking::Statement> statements;
    bool durable = false;
    for (const auto* w : writes) {
      statements.push_back({w->sql, &w->params});
      durable = durable || w->durable;
    }
    if (durable) statements.push_back({&sync_on, &none});
    return pool_.take()->exec_batch(statements, by);
  }

  PgPool pool_;
  std::string schema_;
  const std::string create_sql_, move_sql_;
  GroupCommit group_;  // after pool_: its writes take connections from it
};

}  // namespace

Result<std::unique_ptr<TxLog>> open_pg_log(std::string_view url, bool create_if_missing) {
  auto config = postgres::parse_postgres_url(url);
  if (!config.ok()) return config.status();
  auto log = std::make_unique<PgLog>(config->connection, config->table.schema);
  const std::string where = describe_url(url) + ", schema " + config->table.schema;
  if (Status s = log->init(create_if_missing, where); !s.ok()) return s;
  return std::unique_ptr<TxLog>(std::move(log));
}

}  // namespace dlock::tx::detail

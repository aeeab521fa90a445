#include "postgres/schema.hpp"

namespace dlock::postgres {
namespace {

// Replaces every placeholder `@T` with the schema-qualified table name, and
// `@C` with the release channel.
std::string with_table(std::string sql, const TableName& t) {
  const std::string qualified = t.qualified();
  for (auto at = sql.find("@T"); at != std::string::npos; at = sql.find("@T", at + qualified.size()))
    sql.replace(at, 2, qualified);
  const std::string chan = channel(t);
  for (auto at = sql.find("@C"); at != std::string::npos; at = sql.find("@C", at + chan.size()))
    sql.replace(at, 2, chan);
  return sql;
}

constexpr const char* kCreate = R"sql(
DO $do$
DECLARE v bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('dlock schema @T'));
  PERFORM set_config('synchronous_commit', 'on', true);  -- a table lost in a crash loses its locks
  IF to_regclass('@T_meta') IS NOT NULL THEN
    SELECT value INTO v FROM @T_meta WHERE key = 'schema';
    IF v >= 2 THEN RETURN; END IF;  -- current (or newer: refused by the version check)
  END IF;
  CREATE SEQUENCE IF NOT EXISTS @T_fence NO CYCLE;
  CREATE TABLE IF NOT EXISTS @T (
    name text PRIMARY KEY,
    owner text NOT NULL,
    grant_id bigint NOT NULL,
    depth int NOT NULL,
    fence bigint NOT NULL,
    expires_at timestamptz NOT NULL);
  -- Grants whose acquire may still arrive after the client gave up on it
  -- (its reply was lost): such a stray copy must not take the lock.
  CREATE TABLE IF NOT EXISTS @T_tombstones (
    name text NOT NULL,
    grant_id bigint NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (name, grant_id));

  CREATE OR REPLACE FUNCTION @T_acquire(p_name text, p_owner text, p_grant bigint, p_held int, p_lease bigint)
  RETURNS TABLE (kind int, fence bigint, depth int, ttl_ms bigint) LANGUAGE plpgsql AS $f$
  DECLARE
    r @T%ROWTYPE;
    now_ts timestamptz := clock_timestamp();
    v_until timestamptz := clock_timestamp() + p_lease * interval '1 millisecond';
    existed bool;
    f bigint;
  BEGIN
    IF p_lease IS NULL OR p_lease <= 0 THEN RAISE EXCEPTION 'dlock: lease out of range: %', p_lease; END IF;
    -- A grant is reported only once durable: with the server's
    -- synchronous_commit off, a crash would forget it and hand the lock out
    -- again with the same fence. Raised for this transaction only.
    IF current_setting('synchronous_commit') IN ('off', 'local', 'remote_write') THEN
      PERFORM set_config('synchronous_commit', 'on', true);
    END IF;
    IF p_held = 0 THEN
      -- Serialized with undos of the same name (below in _release), so a
      -- tombstone is seen by every copy of its acquire that comes later.
      PERFORM pg_advisory_xact_lock(hashtextextended('@T ' || p_name, 0));
      IF EXISTS (SELECT 1 FROM @T_tombstones t
                 WHERE t.name = p_name AND t.grant_id = p_grant AND t.expires_at > now_ts) THEN
        RETURN QUERY SELECT 0, 0::bigint, 0, 0::bigint; RETURN;
      END IF;
    END IF;
    LOOP
      SELECT * INTO r FROM @T l WHERE l.name = p_name FOR UPDATE;
      existed := FOUND;
      IF NOT existed OR r.expires_at <= now_ts THEN
        IF p_held > 0 THEN RETURN QUERY SELECT 2, 0::bigint, 0, 0::bigint; RETURN; END IF;
        IF NOT existed THEN
          -- The fence is drawn only once the row is ours (locked): a number
          -- drawn before could lose the race to a later one, whose holder
          -- might then release before this insert lands, and fences would
          -- go backwards.
          INSERT INTO @T VALUES (p_name, p_owner, p_grant, 1, 0, v_until) ON CONFLICT (name) DO NOTHING;
          IF NOT FOUND THEN CONTINUE; END IF;  -- inserted by another session meanwhile: look again
        END IF;
        f := nextval('@T_fence');
        UPDATE @T l SET owner = p_owner, grant_id = p_grant, depth = 1, fence = f, expires_at = v_until
          WHERE l.name = p_name;
        RETURN QUERY SELECT 1, f, 1, 0::bigint; RETURN;
      END IF;
      IF r.owner = p_owner AND r.grant_id = p_grant THEN
        IF r.depth = p_held THEN
          r.depth := r.depth + 1;
        ELSIF r.depth <> p_held + 1 THEN  -- not a replay either
          RETURN QUERY SELECT 3, 0::bigint, r.depth, 0::bigint; RETURN;
        END IF;
        UPDATE @T l SET depth = r.depth, expires_at = greatest(r.expires_at, v_until) WHERE l.name = p_name;
        RETURN QUERY SELECT 1, r.fence, r.depth, 0::bigint; RETURN;
      END IF;
      IF p_held > 0 THEN RETURN QUERY SELECT 2, 0::bigint, 0, 0::bigint; RETURN; END IF;
      RETURN QUERY SELECT 0, 0::bigint, 0,
        greatest(0, ceil(extract(epoch FROM r.expires_at - now_ts) * 1000))::bigint;
      RETURN;
    END LOOP;
  END $f$;
)sql"
                             R"sql(
  CREATE OR REPLACE FUNCTION @T_release(p_name text, p_owner text, p_grant bigint, p_held int, p_all bool,
                                         p_tomb bigint)
  RETURNS TABLE (kind int, depth int) LANGUAGE plpgsql AS $f$
  DECLARE r @T%ROWTYPE;
  BEGIN
    IF p_tomb > 0 THEN
      PERFORM pg_advisory_xact_lock(hashtextextended('@T ' || p_name, 0));
      DELETE FROM @T_tombstones t WHERE t.expires_at <= clock_timestamp();
      INSERT INTO @T_tombstones AS t
        VALUES (p_name, p_grant, clock_timestamp() + p_tomb * interval '1 millisecond')
        ON CONFLICT (name, grant_id) DO UPDATE SET expires_at = greatest(t.expires_at, EXCLUDED.expires_at);
    END IF;
    SELECT * INTO r FROM @T l WHERE l.name = p_name FOR UPDATE;
    IF NOT FOUND OR r.expires_at <= clock_timestamp() THEN RETURN QUERY SELECT 1, 0; RETURN; END IF;
    IF r.owner <> p_owner OR r.grant_id <> p_grant THEN RETURN QUERY SELECT 2, 0; RETURN; END IF;
    IF p_all OR r.depth = p_held THEN
      IF p_all OR r.depth <= 1 THEN
        DELETE FROM @T l WHERE l.name = p_name;
        PERFORM pg_notify('@C', p_name);
        RETURN QUERY SELECT 0, 0; RETURN;
      END IF;
      UPDATE @T l SET depth = r.depth - 1 WHERE l.name = p_name;
      RETURN QUERY SELECT 0, r.depth - 1; RETURN;
    END IF;
    IF r.depth = p_held - 1 THEN RETURN QUERY SELECT 0, r.depth; RETURN; END IF;  -- a replay
    RETURN QUERY SELECT 3, r.depth;
  END $f$;

  CREATE OR REPLACE FUNCTION @T_renew(p_names text[], p_owners text[], p_grants bigint[], p_leases bigint[])
  RETURNS SETOF int LANGUAGE plpgsql AS $f$
  DECLARE r @T%ROWTYPE;
  BEGIN
    -- As in _acquire: a renewal forgotten in a crash would shorten the lease
    -- under its holder.
    IF current_setting('synchronous_commit') IN ('off', 'local', 'remote_write') THEN
      PERFORM set_config('synchronous_commit', 'on', true);
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_names, 1), 0) LOOP
      SELECT * INTO r FROM @T l WHERE l.name = p_names[i] FOR UPDATE;
      IF NOT FOUND OR r.expires_at <= clock_timestamp() THEN
        RETURN NEXT 0;
      ELSIF r.owner <> p_owners[i] OR r.grant_id <> p_grants[i] THEN
        RETURN NEXT 2;
      ELSE
        UPDATE @T l SET expires_at = clock_timestamp() + p_leases[i] * interval '1 millisecond'
          WHERE l.name = p_names[i];
        RETURN NEXT 1;
      END IF;
    END LOOP;
  END $f$;

  CREATE TABLE IF NOT EXISTS @T_meta (key text PRIMARY KEY, value bigint NOT NULL);
  INSERT INTO @T_meta VALUES ('schema', 2) ON CONFLICT (key) DO UPDATE SET value = 2;
END $do$
)sql";

}  // namespace

std::string TableName::qualified() const { return schema + "." + table; }

bool valid_table_name(const std::string& table) {
  if (table.empty() || table.size() > 40) return false;
  if (!(table[0] == '_' || (table[0] >= 'a' && table[0] <= 'z'))) return false;
  for (char c : table)
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

std::string create_schema_sql(const TableName& table) { return with_table(kCreate, table); }

std::string schema_version_sql(const TableName& table) {
  return with_table("SELECT value FROM @T_meta WHERE key = 'schema'", table);
}

std::string acquire_sql(const TableName& table) {
  return with_table("SELECT kind, fence, depth, ttl_ms FROM @T_acquire($1, $2, $3, $4, $5)", table);
}

std::string release_sql(const TableName& table) {
  return with_table("SELECT kind, depth FROM @T_release($1, $2, $3, $4, $5, $6)", table);
}

std::string renew_sql(const TableName& table) {
  return with_table("SELECT * FROM @T_renew($1::text[], $2::text[], $3::bigint[], $4::bigint[])", table);
}

std::string inspect_sql(const TableName& table) {
  return with_table(
      "SELECT (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM @T_fence), l.fence, l.depth, "
      "greatest(0, ceil(extract(epoch FROM l.expires_at - clock_timestamp()) * 1000))::bigint "
      "FROM (SELECT 1) AS one LEFT JOIN @T l ON l.name = $1 AND l.expires_at > clock_timestamp()",
      table);
}

// Unqualified, as LISTEN takes a plain identifier: tables of one name in
// two schemas share it, which costs their waiters a spurious look.
std::string channel(const TableName& t) { return t.table + "_released"; }

}  // namespace dlock::postgres

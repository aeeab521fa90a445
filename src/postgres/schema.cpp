#include "postgres/schema.hpp"

#include "postgres/sql.hpp"

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

}  // namespace

std::string create_schema_sql(const TableName& table) { return with_table(std::string(sql::schema), table); }

std::string schema_version_sql(const TableName& table) {
  return with_table("SELECT value FROM @T_meta WHERE key = 'schema'", table);
}

std::string acquire_sql(const TableName& table) {
  return with_table("SELECT kind, fence, depth, ttl_ms FROM @T_acquire($1, $2, $3, $4, $5, $6, $7, $8)", table);
}

std::string release_sql(const TableName& table) {
  return with_table("SELECT kind, depth FROM @T_release($1, $2, $3, $4, $5, $6)", table);
}

std::string renew_sql(const TableName& table) {
  return with_table("SELECT * FROM @T_renew($1::text[], $2::text[], $3::bigint[], $4::bigint[])", table);
}

// Read-only: what has expired is left out (step 1 of core/lock_line.hpp);
// a promotion it would allow waits for the next call on the name.
std::string inspect_sql(const TableName& table) {
  return with_table(
      "WITH t AS (SELECT clock_timestamp() AS now_ts), "
      "h AS (SELECT l.fence, l.depth, l.expires_at, l.info, false AS shared, l.granted_at FROM @T l, t "
      "      WHERE l.name = $1 AND l.expires_at > t.now_ts "
      "      UNION ALL "
      "      SELECT x.fence, x.depth, x.expires_at, x.info, true, x.granted_at FROM @T_line x, t "
      "      WHERE x.name = $1 AND x.holder AND x.expires_at > t.now_ts) "
      "SELECT (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM @T_fence), f.fence, f.depth, "
      "greatest(0, ceil(extract(epoch FROM f.expires_at - clock_timestamp()) * 1000))::bigint, f.info, f.shared, "
      "(SELECT count(*) FROM h), "
      "(SELECT count(*) FROM @T_line x, t WHERE x.name = $1 AND NOT x.holder AND x.expires_at > t.now_ts) + "
      "(SELECT count(*) FROM @T_waiters w, t WHERE w.name = $1 AND w.expires_at > t.now_ts), "
      "greatest(0, floor(extract(epoch FROM clock_timestamp() - f.granted_at) * 1000))::bigint, "
      "coalesce((SELECT l.line FROM @T l WHERE l.name = $1), false) "
      "FROM (SELECT 1) AS one LEFT JOIN (SELECT * FROM h ORDER BY h.fence LIMIT 1) f ON true",
      table);
}

// Names with a live holder (plain or exclusive: the row; shared: the line).
std::string names_sql(const TableName& table) {
  return with_table(
      "SELECT l.name FROM @T l WHERE l.expires_at > clock_timestamp() AND left(l.name, length($1)) = $1 "
      "UNION SELECT x.name FROM @T_line x WHERE x.holder AND x.expires_at > clock_timestamp() "
      "AND left(x.name, length($1)) = $1",
      table);
}

std::string leave_sql(const TableName& table) { return with_table("SELECT @T_leave($1, $2)", table); }

std::string waiter_channel(const std::string& client) { return "dlockw_" + client; }

std::string line_acquire_sql(const TableName& table) {
  return with_table("SELECT kind, fence, depth, ttl_ms FROM @T_line_acquire($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                    table);
}

std::string line_release_sql(const TableName& table) {
  return with_table("SELECT kind, depth FROM @T_line_release($1, $2, $3, $4, $5, $6)", table);
}

std::string line_abandon_sql(const TableName& table) {
  return with_table("SELECT @T_line_abandon($1, $2, $3, $4, $5)", table);
}

std::string line_renew_sql(const TableName& table) {
  return with_table("SELECT * FROM @T_line_renew($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bool[])",
                    table);
}

bool parse_hand_over(const std::string& payload, HandOverPayload& out) {
  if (payload.size() < 2 || payload[0] != '\x1f' || payload[1] != 'h') return false;
  std::size_t at = 2;
  auto number = [&](std::uint64_t& v) {
    const auto colon = payload.find(':', at);
    if (colon == std::string::npos || colon == at) return false;
    v = 0;
    for (std::size_t i = at; i < colon; ++i) {
      const char c = payload[i];
      if (c == '-') continue;  // a negative bigint: the uint64 it was made from
      if (c < '0' || c > '9') return false;
      v = v * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (payload[at] == '-') v = ~v + 1;
    at = colon + 1;
    return true;
  };
  std::uint64_t owner_bytes = 0;
  if (!number(out.fence) || !number(out.lease_ms) || !number(out.grant) || !number(owner_bytes)) return false;
  if (payload.size() - at < owner_bytes) return false;
  out.owner = payload.substr(at, owner_bytes);
  out.name = payload.substr(at + owner_bytes);
  return !out.owner.empty() && !out.name.empty();
}

// Unqualified, as LISTEN takes a plain identifier: tables of one name in
// two schemas share it, which costs their waiters a spurious look.
std::string channel(const TableName& t) { return t.table + "_released"; }

}  // namespace dlock::postgres

// The lock table in PostgreSQL and the statements on it. Every call is one
// statement and one round trip: a PL/pgSQL function per call, created with
// the table, so the decisions (those of core/lock_row.hpp) run in the
// server, under the row lock, on the server's clock.
//
//   <table>          name PRIMARY KEY, owner, grant_id, depth, fence,
//                    expires_at (timestamptz, clock_timestamp() + lease)
//   <table>_fence    the sequence every fresh grant takes its fence from
//   <table>_tombstones  (name, grant) whose stray acquire must not grant
//   <table>_meta     'schema' = kSchemaVersion
//   NOTIFY <table>_released, payload = the name, at the commit of a release
//
// Every object is qualified with one schema (the URL's `schema`, default
// public), never found through search_path: roles with different
// search_paths must share one table. Version 1 (unqualified, no tombstones,
// commits as the server's synchronous_commit says) is migrated in place.
#ifndef DLOCK_POSTGRES_SCHEMA_HPP_
#define DLOCK_POSTGRES_SCHEMA_HPP_

#include <string>

namespace dlock::postgres {

inline constexpr int kSchemaVersion = 2;

struct TableName {
  std::string schema = "public";
  std::string table = "dlock_locks";
  std::string qualified() const;  // schema.table
};

// A lower-case SQL identifier of at most 40 characters (room for suffixes).
bool valid_table_name(const std::string& table);

// One statement (a DO block) that creates whatever is missing, serialized
// across clients by an advisory lock; idempotent.
std::string create_schema_sql(const TableName& table);
std::string schema_version_sql(const TableName& table);  // one row: the version

// $1 name, $2 owner, $3 grant, $4 held, $5 lease ms -> kind, fence, depth, ttl_ms
// kind: 0 busy, 1 granted, 2 lost, 3 mismatch
std::string acquire_sql(const TableName& table);
// $1 name, $2 owner, $3 grant, $4 held, $5 all, $6 tombstone ms (0: none)
// -> kind, depth
// kind: 0 released, 1 not held, 2 not owner, 3 mismatch
std::string release_sql(const TableName& table);
// $1 names[], $2 owners[], $3 grants[], $4 leases ms[] -> one row per call:
// 0 expired, 1 renewed, 2 taken
std::string renew_sql(const TableName& table);
// $1 name -> last fence, then (if held) fence, depth, remaining ms
std::string inspect_sql(const TableName& table);
std::string channel(const TableName& table);

}  // namespace dlock::postgres

#endif  // DLOCK_POSTGRES_SCHEMA_HPP_

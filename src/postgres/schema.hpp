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
// Lines (fair, shared and counted locks, core/lock_line.hpp), version 3:
//   <table>.info     what an exclusive line holder said of itself (NULL: a
//                    plain grant); the exclusive holder lives in the row
//   <table>.line     the name has shared holders or waiters; while it does
//                    the row stays (free: owner '', expires_at -infinity),
//                    so plain calls learn it from the row they lock anyway
//                    (every line call takes the name's advisory lock, then
//                    its row lock; a release decides for the line under the
//                    row lock alone)
//   <table>_line     shared holders and waiters: (name, owner, grant) PRIMARY
//                    KEY, mode, holder or waiter, ticket, permits, depth,
//                    fence, lease, expires_at, info
//   <table>_ticket   the sequence waiters take their place from
//   <table>_line_tombs  (name, owner, grant) of a line whose stray acquire
//                    must not grant
//   NOTIFY <table>_released, payload = hand_over_payload(): the waiter a
//                    release (or any call) granted and its lease, at that
//                    call's commit (version 4: the lease was added); since
//                    version 7 on its client's channel, dlockw_<client id>
//                    (<table>_line.client), and "\x1fc<name>" on the
//                    table's for observers
//
// A plain lock's waiters (version 6), woken one at a time:
//   <table>_waiters  (name, member "<client id>:<attempt>") in arrival order
//                    (ticket), each until a minute past the wait it was told
//   <table>.waiters  some may wait: a release then wakes the first
//   <table>.woken, woken_until  the waiter a release woke: the free row is
//                    kept for it that long
//   NOTIFY dlockw_<client id>, payload "\x1fw<attempt>:<name>" (woken) or
//                    "\x1fs<attempt>:<ms>:<name>" (stand by: look again
//                    after ms, in case the woken one never comes)
//
// Every object is qualified with one schema (the URL's `schema`, default
// public), never found through search_path: roles with different
// search_paths must share one table. Versions 1 (unqualified, no tombstones,
// commits as the server's synchronous_commit says), 2 (no lines), 3
// (hand-overs without their lease), 4 (no grant times, plain grants
// without their holder's description), 5 (plain waiters all woken by
// every release) and 6 (hand-overs told to every line's waiter) are
// migrated in place.
#ifndef DLOCK_POSTGRES_SCHEMA_HPP_
#define DLOCK_POSTGRES_SCHEMA_HPP_

#include <cstdint>
#include <string>

#include "postgres/table_name.hpp"

namespace dlock::postgres {

inline constexpr int kSchemaVersion = 7;

// One statement (a DO block) that creates whatever is missing, serialized
// across clients by an advisory lock; idempotent.
std::string create_schema_sql(const TableName& table);
std::string schema_version_sql(const TableName& table);  // one row: the version
std::string names_sql(const TableName& table);           // $1: the name prefix

// $1 name, $2 owner, $3 grant, $4 held, $5 lease ms, $6 info, $7 the
// caller's waiter member ('': it will not wait), $8 an earlier attempt was
// busy -> kind, fence, depth, ttl_ms
// kind: 0 busy, 1 granted, 2 lost, 3 mismatch
std::string acquire_sql(const TableName& table);
// $1 name, $2 member: the waiter leaves (passing on a wake-up it was sent).
std::string leave_sql(const TableName& table);
// The channel a client's plain waiters are woken on ("dlockw_<client>").
std::string waiter_channel(const std::string& client);
// $1 name, $2 owner, $3 grant, $4 held, $5 all, $6 tombstone ms (0: none)
// -> kind, depth
// kind: 0 released, 1 not held, 2 not owner, 3 mismatch
std::string release_sql(const TableName& table);
// $1 names[], $2 owners[], $3 grants[], $4 leases ms[] -> one row per call:
// 0 expired, 1 renewed, 2 taken
std::string renew_sql(const TableName& table);
// $1 name -> last fence, then (if held) fence, depth, remaining ms, info
// (NULL: a plain grant), shared; then holders, waiters (the line's and the
// queued plain ones)
std::string inspect_sql(const TableName& table);
std::string channel(const TableName& table);

// $1 name, $2 owner, $3 grant, $4 held, $5 lease ms, $6 shared, $7 permits,
// $8 queued, $9 info -> kind, fence, depth, ttl_ms
// kind: 0 busy (ttl_ms -1: no expiry to wait for), 1 granted, 2 lost,
// 3 mismatch, 4 permits disagree (depth: the name's), 5 a change of mode
// (depth 1: the owner holds it shared, 0: exclusively)
std::string line_acquire_sql(const TableName& table);
// A shared hold's release; as release_sql.
std::string line_release_sql(const TableName& table);
// $1 name, $2 owner, $3 grant, $4 held, $5 tombstone ms -> waiters granted
std::string line_abandon_sql(const TableName& table);
// renew_sql's arrays and $5 lines[] (the call is a line's hold)
std::string line_renew_sql(const TableName& table);

// A NOTIFY payload of a hand-over (distinct from a release's, the bare
// name), and its parse; false: not one.
struct HandOverPayload {
  std::string name, owner;
  std::uint64_t grant = 0, fence = 0, lease_ms = 0;
};
bool parse_hand_over(const std::string& payload, HandOverPayload& out);

}  // namespace dlock::postgres

#endif  // DLOCK_POSTGRES_SCHEMA_HPP_

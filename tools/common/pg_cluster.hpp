// tools/common/pg_cluster.hpp: private PostgreSQL 15 clusters on loopback
// ports, for the tests (PostgresServer), the verifier (PgProc) and the
// experiments (start_postgres). As root, PostgreSQL's programs run as the
// `postgres` user: initdb and the server refuse root.
//
// A cluster lives in a directory `dir`: its data in dir/data, its Unix
// socket in dir, the server's log in dir/server.log, pg_ctl's output in
// dir/pg_ctl.log.
#ifndef DLOCK_TOOLS_COMMON_PG_CLUSTER_HPP_
#define DLOCK_TOOLS_COMMON_PG_CLUSTER_HPP_

#include <filesystem>
#include <string>
#include <vector>

#include "common/child_process.hpp"

namespace dlock::tools {

// True if PostgreSQL 15's server programs are installed.
bool postgres_installed();

// As root, hands `path` to the `postgres` user (initdb and the server refuse
// to run as root, and the data directory must be theirs); otherwise a no-op.
// Throws if it cannot.
void give_to_postgres(const std::string& path);

// Makes `data_dir` (absent; its parent the postgres user's when root) a fresh
// PostgreSQL 15 data directory, as `initdb -U postgres --auth=trust -E UTF8
// --locale=C.UTF-8` makes it. initdb costs about 2 s of CPU, so it runs once
// per machine and user into a template kept in /tmp (made under a file lock,
// moved into place whole) and each call copies that. Throws on failure,
// naming `log`, where the programs' output goes.
void pg_initdb(const std::string& data_dir, const std::string& log);

// A new cluster directory, `prefix` + a unique suffix (e.g.
// "/tmp/dlock-pg-"), with its data made by pg_initdb. Throws on failure.
std::string pg_new_cluster(const std::string& prefix);

// Starts the cluster in `dir` with pg_ctl on 127.0.0.1:`port`, `settings`
// ("name=value") on top of the defaults, and returns once it accepts
// connections. Throws std::runtime_error with pg_ctl's output.
void pg_start(const std::string& dir, int port, const std::vector<std::string>& settings);
// pg_ctl stop in `mode`: "fast" (clients are disconnected, everything
// committed is kept) or "immediate" (as a crash: the next start runs crash
// recovery). Returns once it is down; false if pg_ctl failed.
bool pg_stop(const std::string& dir, const std::string& mode);

// A private PostgreSQL 15 cluster in `dir` (created; as root, run as the
// postgres user), on a free 127.0.0.1 port, taking prepared transactions;
// its server is appended to `children` (in this process's group: a
// terminal's Ctrl-C stops it too). Returns its URL
// (postgres://postgres@127.0.0.1:PORT/postgres), or "" if PostgreSQL is
// not installed. Throws if it does not start.
std::string start_postgres(const std::filesystem::path& dir, std::vector<Child>& children);
// Stops the cluster in `dir` (fast: clients are disconnected), before its
// child is reaped: as root that child is runuser, and a signal to it does
// not reach the server.
void stop_postgres(const std::filesystem::path& dir);

}  // namespace dlock::tools

#endif  // DLOCK_TOOLS_COMMON_PG_CLUSTER_HPP_

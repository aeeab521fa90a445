// A private PostgreSQL cluster for one verifier run (common/pg_cluster.hpp):
// initdb in a temp dir (as the `postgres` user when run as root), started on
// a free loopback port with durable commits (fsync and synchronous_commit on,
// as a user's server would be), restarted fast or immediately on the
// nemesis' orders, always stopped and removed at the end.
#ifndef DLOCK_TORTURE_PG_PROC_HPP_
#define DLOCK_TORTURE_PG_PROC_HPP_

#include <cstdint>
#include <string>
#include <vector>

#include "common/pg_cluster.hpp"

namespace torture {

class PgProc {
 public:
  // `log_copy`: where the server log is copied when the cluster goes.
  // Throws std::runtime_error naming the step that failed.
  // `settings`: "name=value" server settings on top of the defaults (a
  // scenario's parameters, e.g. synchronous_commit=off).
  explicit PgProc(std::string log_copy, std::vector<std::string> settings = {});
  ~PgProc();  // immediate stop, directory removed; never throws
  PgProc(const PgProc&) = delete;
  PgProc& operator=(const PgProc&) = delete;

  std::uint16_t port() const { return port_; }
  // libpq URL of the superuser on the `postgres` database, direct (no proxy).
  std::string url() const;
  // "fast": clients are disconnected, everything committed is kept.
  // "immediate": the postmaster and backends quit at once; the next start
  // runs crash recovery. Throws if the cluster does not come back.
  void restart(const std::string& mode);
  int postmaster_pid() const;  // -1 if unknown
  // Runs `sql` as the superuser on a fresh direct connection; the first
  // column of the first row, "" for none. Throws std::runtime_error.
  std::string query(const std::string& sql) const;

 private:
  void start();
  void stop(const std::string& mode);
  std::string dir_;
  std::string log_copy_;
  std::vector<std::string> settings_;
  std::uint16_t port_ = 0;
};

using dlock::tools::postgres_installed;
std::string postgres_version();  // "15.x", or "unknown"

}  // namespace torture

#endif  // DLOCK_TORTURE_PG_PROC_HPP_

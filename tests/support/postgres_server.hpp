// tests/support/postgres_server.hpp: a private PostgreSQL 15 cluster for one
// test (common/pg_cluster.hpp): a fresh data directory in a temp dir,
// started on a free loopback port without durable commits (tests want
// speed), stopped (fast shutdown) and removed when the object goes. As root,
// the cluster runs as the `postgres` user (initdb refuses root).
//
//   PostgresServer pg;
//   auto client = dlock::Client::connect(pg.url());
#ifndef DLOCK_TESTS_SUPPORT_POSTGRES_SERVER_HPP_
#define DLOCK_TESTS_SUPPORT_POSTGRES_SERVER_HPP_

#include <string>
#include <vector>

#include "common/pg_cluster.hpp"

namespace dlock::test {

class PostgresServer {
 public:
  PostgresServer();  // throws std::runtime_error, naming the step that failed
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  // postgres://postgres@127.0.0.1:PORT/postgres plus `params` ("a=b&c=d").
  std::string url(const std::string& params = "") const;
  // Runs one SQL command through psql as the superuser, in database `db`;
  // its stdout.
  std::string psql(const std::string& sql, const std::string& db = "postgres") const;
  // Restarts the cluster with TLS on (ssl=on), serving a certificate for
  // 127.0.0.1 and localhost signed by a throw-away CA (ca_file()); plain
  // connections are still accepted, as by default.
  void enable_tls();
  std::string ca_file() const { return dir_ + "/tls/ca.crt"; }
  void stop();   // fast shutdown
  void start();  // again, same port and data
  // Stops at once, as a crash would (pg_ctl -m immediate: no checkpoint,
  // WAL buffers not yet written are lost).
  void crash();
  // A server setting for every later start(): `-c name=value`.
  void set(const std::string& name, const std::string& value) { settings_.push_back(name + "=" + value); }
  bool running() const { return running_; }

 private:
  std::string dir_;
  int port_ = 0;
  bool running_ = false;
  bool tls_ = false;
  std::vector<std::string> settings_;
};

// True if PostgreSQL's server programs are installed.
inline bool postgres_available() { return tools::postgres_installed(); }

}  // namespace dlock::test

#endif  // DLOCK_TESTS_SUPPORT_POSTGRES_SERVER_HPP_

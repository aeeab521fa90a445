#include "support/postgres_server.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "common/child_process.hpp"
#include "support/process.hpp"
#include "support/redis_server.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
const std::string kBin = "/usr/lib/postgresql/15/bin/";
}  // namespace

bool postgres_available() { return std::filesystem::exists(kBin + "initdb"); }

std::vector<std::string> PostgresServer::as_owner(std::vector<std::string> argv) const {
  if (geteuid() != 0) return argv;
  argv.insert(argv.begin(), {"runuser", "-u", "postgres", "--"});
  return argv;
}

PostgresServer::PostgresServer() {
  std::string tmpl = "/tmp/dlock-pg-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
  dir_ = tmpl;
  tools::give_to_postgres(dir_);
  tools::pg_initdb(dir_ + "/data", dir_ + "/initdb.log");
  port_ = free_port();
  start();
}

void PostgresServer::enable_tls() {
  const std::string tls = dir_ + "/tls";
  std::filesystem::create_directories(tls);
  make_ca(tls, "ca");
  make_leaf(tls, "server", "localhost",
            "basicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=serverAuth\n"
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  // The server refuses a key others may read; as root it must be postgres'.
  std::filesystem::permissions(tls + "/server.key",
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  for (const char* f : {"", "/server.key", "/server.crt"}) tools::give_to_postgres(tls + f);
  stop();
  tls_ = true;
  start();
}

void PostgresServer::start() {
  std::string opts = "-p " + std::to_string(port_) +
                     " -c listen_addresses=127.0.0.1 -c unix_socket_directories=" + dir_ +
                     " -c fsync=off -c synchronous_commit=off -c full_page_writes=off";
  opts += settings_;
  if (tls_)
    opts += " -c ssl=on -c ssl_cert_file=" + dir_ + "/tls/server.crt -c ssl_key_file=" + dir_ + "/tls/server.key";
  auto r = run(as_owner({kBin + "pg_ctl", "-D", dir_ + "/data", "-l", dir_ + "/server.log", "-w", "-t", "30", "-o",
                         opts, "start"}),
               60s);
  if (r.exit_code != 0) throw std::runtime_error("pg_ctl start failed: " + r.err + r.out);
  running_ = true;
}

void PostgresServer::stop() {
  if (!running_) return;
  run(as_owner({kBin + "pg_ctl", "-D", dir_ + "/data", "-m", "fast", "-w", "-t", "30", "stop"}), 60s);
  running_ = false;
}

void PostgresServer::crash() {
  if (!running_) return;
  run(as_owner({kBin + "pg_ctl", "-D", dir_ + "/data", "-m", "immediate", "-w", "-t", "30", "stop"}), 60s);
  running_ = false;
}

PostgresServer::~PostgresServer() {
  try {
    stop();
  } catch (...) {
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string PostgresServer::url(const std::string& params) const {
  return "postgres://postgres@127.0.0.1:" + std::to_string(port_) + "/postgres" + (params.empty() ? "" : "?" + params);
}

std::string PostgresServer::psql(const std::string& sql, const std::string& db) const {
  auto r = run({"psql", "-h", "127.0.0.1", "-p", std::to_string(port_), "-U", "postgres", "-d", db, "-XAtq", "-v",
                "ON_ERROR_STOP=1", "-c", "SET default_transaction_read_only = off", "-c", sql},
               30s);
  if (r.exit_code != 0) throw std::runtime_error("psql failed: " + r.err);
  return r.out;
}

}  // namespace dlock::test

#include "support/postgres_server.hpp"

#include <chrono>
#include <filesystem>
#include <stdexcept>

#include "support/process.hpp"
#include "support/redis_server.hpp"

namespace dlock::test {

using namespace std::chrono_literals;

PostgresServer::PostgresServer() : dir_(tools::pg_new_cluster("/tmp/dlock-pg-")), port_(free_port()) { start(); }

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
  std::vector<std::string> settings{"fsync=off", "synchronous_commit=off", "full_page_writes=off"};
  settings.insert(settings.end(), settings_.begin(), settings_.end());
  if (tls_)
    settings.insert(settings.end(), {"ssl=on", "ssl_cert_file=" + dir_ + "/tls/server.crt",
                                     "ssl_key_file=" + dir_ + "/tls/server.key"});
  tools::pg_start(dir_, port_, settings);
  running_ = true;
}

void PostgresServer::stop() {
  if (!running_) return;
  tools::pg_stop(dir_, "fast");
  running_ = false;
}

void PostgresServer::crash() {
  if (!running_) return;
  tools::pg_stop(dir_, "immediate");
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

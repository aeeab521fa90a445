#include "pg_proc.hpp"

#include <libpq-fe.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <vector>

#include "common/pg_cluster.hpp"
#include "server_proc.hpp"

namespace torture {
namespace {

namespace fs = std::filesystem;
const std::string kBin = "/usr/lib/postgresql/15/bin/";

}  // namespace

std::string postgres_version() {
  FILE* p = ::popen((kBin + "postgres --version 2>/dev/null").c_str(), "r");
  if (!p) return "unknown";
  char buf[128] = {};
  const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
  ::pclose(p);
  std::string line = got ? buf : "";
  const auto space = line.rfind(' ');
  if (space == std::string::npos) return "unknown";
  line = line.substr(space + 1);
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

PgProc::PgProc(std::string log_copy, std::vector<std::string> settings)
    : dir_(dlock::tools::pg_new_cluster("/tmp/dlock-torture-pg-")),
      log_copy_(std::move(log_copy)),
      settings_(std::move(settings)),
      port_(free_port()) {
  start();
}

PgProc::~PgProc() {
  try {
    stop("immediate");
    std::error_code ec;
    if (!log_copy_.empty()) fs::copy_file(dir_ + "/server.log", log_copy_, fs::copy_options::overwrite_existing, ec);
    fs::remove_all(dir_, ec);
  } catch (...) {
  }
}

std::string PgProc::url() const { return "postgres://postgres@127.0.0.1:" + std::to_string(port_) + "/postgres"; }

void PgProc::start() {
  std::vector<std::string> settings{"max_connections=200"};
  settings.insert(settings.end(), settings_.begin(), settings_.end());
  dlock::tools::pg_start(dir_, port_, settings);
}

void PgProc::stop(const std::string& mode) { dlock::tools::pg_stop(dir_, mode); }

void PgProc::restart(const std::string& mode) {
  stop(mode);
  start();
}

int PgProc::postmaster_pid() const {
  std::ifstream in(dir_ + "/data/postmaster.pid");
  int pid = -1;
  in >> pid;
  return in ? pid : -1;
}

std::string PgProc::query(const std::string& sql) const {
  std::unique_ptr<PGconn, void (*)(PGconn*)> conn(PQconnectdb((url() + "?connect_timeout=5").c_str()), PQfinish);
  if (PQstatus(conn.get()) != CONNECTION_OK)
    throw std::runtime_error(std::string("cannot connect to the verifier's PostgreSQL: ") + PQerrorMessage(conn.get()));
  std::unique_ptr<PGresult, void (*)(PGresult*)> res(PQexec(conn.get(), sql.c_str()), PQclear);
  const auto st = PQresultStatus(res.get());
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
    throw std::runtime_error("'" + sql + "' failed: " + PQresultErrorMessage(res.get()));
  if (st != PGRES_TUPLES_OK || PQntuples(res.get()) == 0 || PQnfields(res.get()) == 0) return "";
  return PQgetvalue(res.get(), 0, 0);
}

}  // namespace torture

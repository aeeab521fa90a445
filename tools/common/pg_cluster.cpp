#include "common/pg_cluster.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <thread>

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace dlock::tools {
namespace {

const std::string kPgBin = "/usr/lib/postgresql/15/bin/";

// As root, PostgreSQL's programs run as the postgres user (initdb refuses root).
std::vector<std::string> as_postgres(std::vector<std::string> argv) {
  if (geteuid() == 0) argv.insert(argv.begin(), {"runuser", "-u", "postgres", "--"});
  return argv;
}

// The server's options for a cluster in `dir` on 127.0.0.1:port: no TCP
// listener but loopback, its socket in `dir` (not the system's), `settings`.
std::vector<std::string> server_options(const std::string& dir, int port, const std::vector<std::string>& settings) {
  std::vector<std::string> out{
      "-p", std::to_string(port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + dir};
  for (const auto& s : settings) out.insert(out.end(), {"-c", s});
  return out;
}

std::string pg_template(const std::string& log) {
  const std::string dir = "/tmp/dlock-pg15-template-" + std::to_string(geteuid());
  const std::string data = dir + "/data";
  if (fs::exists(data + "/PG_VERSION")) return data;
  const int fd = open((dir + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 || flock(fd, LOCK_EX) != 0) {
    if (fd >= 0) close(fd);
    throw std::runtime_error("cannot lock " + dir + ".lock");
  }
  struct Unlock {
    int fd;
    ~Unlock() { close(fd); }
  } unlock{fd};
  if (fs::exists(data + "/PG_VERSION")) return data;  // made while we waited
  std::string tmp = dir + ".new-XXXXXX";
  if (mkdtemp(tmp.data()) == nullptr) throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
  give_to_postgres(tmp);
  if (run_to_end(as_postgres({kPgBin + "initdb", "-D", tmp + "/data", "-U", "postgres", "--auth=trust", "-E", "UTF8",
                              "--locale=C.UTF-8", "--no-sync"}),
                 log) != 0) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw std::runtime_error("initdb failed (see " + log + ")");
  }
  fs::rename(tmp, dir);
  return data;
}

}  // namespace

bool postgres_installed() { return fs::exists(kPgBin + "initdb"); }

void give_to_postgres(const std::string& path) {
  if (geteuid() != 0) return;
  const passwd* pw = getpwnam("postgres");
  if (pw == nullptr || chown(path.c_str(), pw->pw_uid, pw->pw_gid) != 0)
    throw std::runtime_error("cannot hand " + path + " to the 'postgres' user");
}

void pg_initdb(const std::string& data_dir, const std::string& log) {
  // cp -a keeps the owner (postgres, when root) and the 0700 modes.
  if (run_to_end({"cp", "-a", pg_template(log), data_dir}, log) != 0)
    throw std::runtime_error("copying PostgreSQL's initdb template to " + data_dir + " failed (see " + log + ")");
}

std::string pg_new_cluster(const std::string& prefix) {
  std::string dir = prefix + "XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
  give_to_postgres(dir);
  pg_initdb(dir + "/data", dir + "/initdb.log");
  return dir;
}

void pg_start(const std::string& dir, int port, const std::vector<std::string>& settings) {
  std::string opts;
  for (const auto& o : server_options(dir, port, settings)) opts += (opts.empty() ? "" : " ") + o;
  const std::string log = dir + "/pg_ctl.log";
  fs::remove(log);  // what this start says, for the error below
  if (run_to_end(as_postgres({kPgBin + "pg_ctl", "-D", dir + "/data", "-l", dir + "/server.log", "-w", "-t", "60", "-o",
                              opts, "start"}),
                 log, 90s) != 0) {
    std::ifstream in(log);
    const std::string said{std::istreambuf_iterator<char>(in), {}};
    throw std::runtime_error("pg_ctl start failed: " + said + " (see " + dir + "/server.log)");
  }
}

bool pg_stop(const std::string& dir, const std::string& mode) {
  return run_to_end(as_postgres({kPgBin + "pg_ctl", "-D", dir + "/data", "-m", mode, "-w", "-t", "60", "stop"}),
                    dir + "/pg_ctl.log", 90s) == 0;
}

std::string start_postgres(const fs::path& dir, std::vector<Child>& children) {
  if (!postgres_installed()) return "";
  const std::string log = (dir.parent_path() / "pg.log").string();
  // The postgres user must reach `dir` through its parent (mkdtemp's 0700).
  fs::permissions(dir.parent_path(), fs::perms::others_exec | fs::perms::group_exec, fs::perm_options::add);
  fs::create_directories(dir);
  give_to_postgres(dir.string());
  pg_initdb((dir / "data").string(), log);
  const int port = free_port();
  // The server itself, not pg_ctl's daemon: a child in this process's group.
  std::vector<std::string> argv{kPgBin + "postgres", "-D", (dir / "data").string()};
  for (auto& o : server_options(dir.string(), port, {"max_prepared_transactions=64"})) argv.push_back(std::move(o));
  children.push_back(start_child(as_postgres(argv), false, log));
  for (int i = 0; i < 500 && !port_open(port); ++i) std::this_thread::sleep_for(20ms);
  if (!port_open(port)) throw std::runtime_error("postgres did not start (see " + log + ")");
  return "postgres://postgres@127.0.0.1:" + std::to_string(port) + "/postgres";
}

void stop_postgres(const fs::path& dir) {
  if (fs::exists(dir / "data" / "postmaster.pid")) pg_stop(dir.string(), "fast");
}

}  // namespace dlock::tools

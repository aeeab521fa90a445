#include "support/pgbouncer.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "common/pg_cluster.hpp"
#include "support/process.hpp"
#include "support/redis_server.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kProgram = "/usr/sbin/pgbouncer";

bool accepts(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

pid_t read_pid(const std::string& file) {
  std::ifstream in(file);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

}  // namespace

bool pgbouncer_available() { return std::filesystem::exists(kProgram); }

PgBouncer::PgBouncer(int server_port, int pool_size, bool discard_always) : port_(free_port()) {
  char tmpl[] = "/tmp/dlock-pgbouncer-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("pgbouncer: mkdtemp failed");
  dir_ = tmpl;
  {
    std::ofstream ini(dir_ + "/pgbouncer.ini");
    ini << "[databases]\n* = host=127.0.0.1 port=" << server_port << "\n"
        << "[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = " << port_ << "\n"
        << "unix_socket_dir =\nauth_type = trust\nauth_file = " << dir_ << "/users.txt\n"
        << "pool_mode = transaction\ndefault_pool_size = " << pool_size << "\nmax_client_conn = 200\n"
        << "ignore_startup_parameters = extra_float_digits,options\n"
        << "logfile = " << dir_ << "/pgbouncer.log\npidfile = " << dir_ << "/pgbouncer.pid\n";
    if (discard_always) ini << "server_reset_query = DISCARD ALL\nserver_reset_query_always = 1\n";
    std::ofstream users(dir_ + "/users.txt");
    users << "\"postgres\" \"\"\n";
  }
  std::vector<std::string> argv{kProgram, "-d", dir_ + "/pgbouncer.ini"};
  if (geteuid() == 0) {
    tools::give_to_postgres(dir_);
    for (const char* f : {"/pgbouncer.ini", "/users.txt"}) tools::give_to_postgres(dir_ + f);
    argv.insert(argv.begin(), {"runuser", "-u", "postgres", "--"});
  }
  const auto r = run(argv, 10s);
  if (r.exit_code != 0) throw std::runtime_error("pgbouncer did not start: " + r.err + r.out);
  for (int i = 0; i < 500 && !accepts(port_); ++i) std::this_thread::sleep_for(10ms);
  if (!accepts(port_)) throw std::runtime_error("pgbouncer does not accept connections on " + std::to_string(port_));
}

PgBouncer::~PgBouncer() {
  const pid_t pid = read_pid(dir_ + "/pgbouncer.pid");
  if (pid > 0 && kill(pid, SIGINT) == 0)
    for (int i = 0; i < 500 && kill(pid, 0) == 0; ++i) std::this_thread::sleep_for(10ms);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace dlock::test

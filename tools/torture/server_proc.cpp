#include "server_proc.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "common/sync_redis.hpp"

namespace torture {

using dlock::tools::SyncRedis;

std::string redis_version(const std::string& binary) {
  const std::string cmd = binary + " --version 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return "unknown";
  char buf[256] = {};
  const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
  ::pclose(p);
  if (!got) return "unknown";
  const std::string line(buf);
  const auto at = line.find("v=");
  if (at == std::string::npos) return "unknown";
  return line.substr(at + 2, line.find(' ', at) - at - 2);
}

ServerProc::ServerProc(ServerSpec spec) : spec_(std::move(spec)) {
  if (spec_.port == 0) spec_.port = free_port();
}

ServerProc::~ServerProc() {
  try {
    kill9();
  } catch (...) {
  }
}

void ServerProc::start() {
  std::vector<std::string> args{spec_.binary,
                                "--port",
                                std::to_string(spec_.port),
                                "--bind",
                                "127.0.0.1",
                                "--dir",
                                spec_.dir,
                                "--logfile",
                                spec_.dir + "/redis.log",
                                "--save",
                                "",
                                "--daemonize",
                                "no",
                                "--enable-debug-command",
                                "local"};
  if (spec_.aof_always) {
    for (const char* a : {"--appendonly", "yes", "--appendfsync", "always"}) args.emplace_back(a);
  } else {
    for (const char* a : {"--appendonly", "no"}) args.emplace_back(a);
  }
  args.insert(args.end(), spec_.extra_args.begin(), spec_.extra_args.end());
  // dlock's workers' user, on the data servers (a sentinel has no data).
  if (std::find(args.begin(), args.end(), "--sentinel") == args.end())
    for (const std::string& a :
         {std::string("--user"), std::string(kTortureUser), std::string("on"), ">" + std::string(kTorturePassword),
          std::string("~*"), std::string("&*"), std::string("+@all")})
      args.push_back(a);
  if (!spec_.config_file.empty()) args.insert(args.begin() + 1, spec_.config_file);
  dlock::tools::SpawnOptions options;
  if (!spec_.clock_shim.empty())
    options.env = {{"LD_PRELOAD", spec_.clock_shim}, {"DLOCK_CLOCK_SHIM_FILE", spec_.clock_file}};
  options.isolate = false;
  const pid_t pid = dlock::tools::spawn(args, options);
  pid_ = pid;
  SyncRedis probe("127.0.0.1", spec_.port, std::chrono::milliseconds(200));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = probe.cmd({"PING"});
    if (r.good() && r.str == "PONG") return;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("redis-server exited at start; see " + spec_.dir + "/redis.log");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill9();
  throw std::runtime_error("redis-server did not answer PING within 5 s on port " + std::to_string(spec_.port));
}

void ServerProc::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGCONT);
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

void ServerProc::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGCONT);
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 300; ++i) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill9();
}

}  // namespace torture

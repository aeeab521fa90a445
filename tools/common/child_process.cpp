#include "common/child_process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

using namespace std::chrono_literals;

namespace dlock::tools {
namespace {

// A wait status as a shell reports it: the exit code, or 128 + the signal.
int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

Child start_child(const std::vector<std::string>& argv, bool capture_stdout, const std::string& log) {
  int fds[2] = {-1, -1};
  if (capture_stdout && pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  try {
    SpawnOptions options;
    options.output_file = log;
    options.out_fd = fds[1];
    options.isolate = false;
    const pid_t pid = spawn(argv, options);
    if (capture_stdout) close(fds[1]);
    return {pid, fds[0]};
  } catch (...) {
    for (int fd : fds)
      if (fd >= 0) close(fd);
    throw;
  }
}

bool child_exited(Child& child, int* exit_code) {
  if (child.pid <= 0) return true;
  int status = 0;
  if (waitpid(child.pid, &status, WNOHANG) != child.pid) return false;
  if (exit_code) *exit_code = exit_code_of(status);
  child.pid = -1;
  return true;
}

bool child_running(const Child& child) {
  if (child.pid <= 0) return false;
  siginfo_t info{};
  return waitid(P_PID, static_cast<id_t>(child.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
}

void stop_child(Child& child, int signal) {
  if (child.pid > 0) {
    kill(child.pid, signal);
    for (int i = 0; i < 250 && !child_exited(child); ++i) std::this_thread::sleep_for(20ms);
  }
  kill_child(child);
}

void kill_child(Child& child) {
  if (child.pid > 0) {
    kill(child.pid, SIGKILL);
    waitpid(child.pid, nullptr, 0);
    child.pid = -1;
  }
  if (child.out_fd >= 0) close(child.out_fd);  // a restarted child gets a new pipe
  child.out_fd = -1;
}

int run_to_end(const std::vector<std::string>& argv, const std::string& log, std::chrono::seconds limit) {
  SpawnOptions options;
  options.output_file = log;
  options.isolate = false;
  const pid_t pid = spawn(argv, options);
  const int code = wait_exit(pid, limit);
  if (code != -1) return code;
  kill(pid, SIGKILL);
  wait_exit(pid, 5s);
  return -1;
}

int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int err = errno;
    if (s >= 0) ::close(s);
    throw std::runtime_error(std::string("no free loopback port: ") + std::strerror(err));
  }
  ::close(s);
  return ntohs(a.sin_port);
}

bool port_open(int port) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(s);
  return ok;
}

int read_listening_port(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line += c;
  if (line.rfind("listening ", 0) != 0) throw std::runtime_error("service did not start: '" + line + "'");
  return std::stoi(line.substr(10));
}

namespace {

// A thread's state letter from /proc/PID/task/TID/stat ('?' if unreadable).
char thread_state(const std::filesystem::path& stat) {
  std::ifstream in(stat);
  std::string line;
  std::getline(in, line);
  const auto paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() ? '?' : line[paren + 2];
}

}  // namespace

bool stop_process(pid_t pid, std::chrono::milliseconds patience) {
  if (pid <= 0 || ::kill(pid, SIGSTOP) != 0) return false;
  const auto until = std::chrono::steady_clock::now() + patience;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  while (std::chrono::steady_clock::now() < until) {
    bool all = true;
    std::error_code ec;
    for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
      const char st = thread_state(t.path() / "stat");
      if (st != 'T' && st != 't') all = false;
    }
    if (ec) return false;  // gone
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

}  // namespace dlock::tools

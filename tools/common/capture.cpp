#include "common/capture.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace dlock::tools {
namespace {

using Clock = std::chrono::steady_clock;

// An fd that closes itself.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

void make_pipe(Fd& read_end, Fd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2: " + std::string(std::strerror(errno)));
  read_end.reset(fds[0]);
  write_end.reset(fds[1]);
}

}  // namespace

RunResult run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout, const Env& env) {
  Fd out_read, out_write, err_read, err_write;
  make_pipe(out_read, out_write);
  make_pipe(err_read, err_write);
  SpawnOptions options;
  options.env = env;
  options.out_fd = out_write.get();
  options.err_fd = err_write.get();
  const pid_t pid = spawn(argv, options);
  out_write.reset();
  err_write.reset();

  RunResult result;
  auto deadline = Clock::now() + timeout;
  bool killed = false;
  pollfd fds[2] = {{out_read.get(), POLLIN, 0}, {err_read.get(), POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_count = 2;
  while (open_count > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      if (killed) break;  // something outside the group still holds the pipes
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      killed = true;
      result.timed_out = true;
      deadline = Clock::now() + std::chrono::seconds(1);
      continue;
    }
    int r = ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 100)));
    if (r < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[4096];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
  auto left = std::max(deadline - Clock::now(), Clock::duration::zero());
  int code = wait_exit(pid, std::chrono::duration_cast<std::chrono::milliseconds>(left));
  if (code == -1) {  // closed its output but still running at the deadline
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    result.timed_out = true;
    code = wait_exit(pid, std::chrono::seconds(5));
  }
  result.exit_code = result.timed_out ? -1 : code;
  return result;
}

}  // namespace dlock::tools

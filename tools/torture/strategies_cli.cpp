#include "strategies_cli.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "common/sync_redis.hpp"
#include "history.hpp"
#include "line_socket.hpp"
#include "worker.hpp"

namespace torture {
namespace {

using std::chrono::milliseconds;
constexpr int kLockLostExit = 79;  // dlock run: the lock was lost while CMD ran
constexpr int kTimeoutExit = 75;   // dlock run: not acquired within --wait
constexpr int kUsageExit = 64;

std::string self_exe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

class CliRun final : public Strategy {
 public:
  explicit CliRun(const StrategyConfig& c) : config_(c) {
    listen_fd_ = listen_loopback(port_, "dlock-run");
    const char* cli = std::getenv("DLOCK_TORTURE_CLI");
    dlock_ = cli ? cli : (std::filesystem::path(self_exe()).parent_path() / "dlock").string();
  }
  ~CliRun() override {
    if (child_ > 0) release();
    ::close(listen_fd_);
  }

  AcquireResult acquire(milliseconds wait, std::function<void()> on_lost) override {
    const std::vector<std::string> args{dlock_,
                                        "run",
                                        "--url",
                                        "sqlite://" + config_.sqlite_path,
                                        "--ttl",
                                        std::to_string(config_.ttl_ms) + "ms",
                                        "--wait",
                                        std::to_string(wait.count()) + "ms",
                                        "--grace",
                                        "1s",
                                        config_.key,
                                        "--",
                                        self_exe(),
                                        "cli-cmd",
                                        "--port",
                                        std::to_string(port_),
                                        "--resource-port",
                                        std::to_string(config_.resource_port)};
    child_ = ::fork();
    if (child_ < 0) return {Outcome::fail, 0, "fork failed"};
    if (child_ == 0) {
      std::vector<char*> argv;
      for (const auto& s : args) argv.push_back(const_cast<char*>(s.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    if (config_.on_child) config_.on_child(child_);
    // CMD calls back once dlock holds the lock; dlock exits if it cannot.
    const auto deadline = mono_ns() + (wait.count() + 5000) * 1'000'000;
    while (conn_ < 0) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) > 0) conn_ = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn_ >= 0) break;
      int status = 0;
      if (::waitpid(child_, &status, WNOHANG) == child_) {
        child_ = -1;
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        // Not acquired within --wait, or refused: nothing held; else unknown.
        return {code == kTimeoutExit || code == kUsageExit ? Outcome::fail : Outcome::info, 0,
                "dlock run exited " + std::to_string(code) + " before CMD started"};
      }
      if (mono_ns() > deadline) {
        abandon();
        return {Outcome::info, 0, "dlock run neither ran CMD nor exited"};
      }
    }
    std::string line;
    if (!read_line(conn_, buf_, line) || line.rfind("fence ", 0) != 0) {
      abandon();
      return {Outcome::info, 0, "CMD did not report its fence"};
    }
    const std::uint64_t fence = std::stoull(line.substr(6));
    ended_ = false;
    releasing_ = false;
    reader_ = std::thread([this, on_lost = std::move(on_lost)] { read_loop(on_lost); });
    return {Outcome::ok, fence, {}};
  }

  // CMD cannot ask dlock whether the lock is still held; it runs until
  // dlock stops it.
  bool still_valid() const override {
    std::lock_guard<std::mutex> g(mu_);
    return !ended_;
  }

  std::optional<RegisterWrites> write_registers(std::uint64_t fence) override {
    RegisterWrites r;
    if (!write_all(conn_, "write " + std::to_string(fence) + "\n")) {
      r.detail = "CMD is gone";
      return r;
    }
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !replies_.empty() || ended_; });
    if (replies_.empty()) {
      r.detail = "CMD ended before it replied";
      return r;
    }
    const std::string reply = replies_.front();
    replies_.pop_front();
    long long accepted = -1, seq = 0, useq = -1;
    if (std::sscanf(reply.c_str(), "%lld %lld %lld", &accepted, &seq, &useq) == 3) {
      if (accepted >= 0) r.fenced_accepted = accepted == 1;
      r.fenced_seq = seq;
      if (useq >= 0) r.unfenced_seq = useq;
    }
    return r;
  }

  ReleaseResult release() override {
    if (child_ <= 0) return {Outcome::fail, "no lease"};
    {
      std::lock_guard<std::mutex> g(mu_);
      releasing_ = true;
    }
    ::shutdown(conn_, SHUT_WR);  // CMD reads EOF and exits 0; dlock releases
    int status = 0;
    const auto deadline = mono_ns() + (3 * config_.ttl_ms + 10'000) * 1'000'000;
    pid_t got = 0;
    while ((got = ::waitpid(child_, &status, WNOHANG)) == 0 && mono_ns() < deadline)
      std::this_thread::sleep_for(milliseconds(5));
    ReleaseResult r{Outcome::info, "dlock run did not exit"};
    if (got == child_) {
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      if (code == 0)
        r = {Outcome::ok, {}};
      else if (code == kLockLostExit)
        r = {Outcome::fail, "dlock run: lock lost while CMD ran"};
      else
        r = {Outcome::info, "dlock run exited " + std::to_string(code)};
    } else {
      ::kill(child_, SIGKILL);
      ::waitpid(child_, &status, 0);
    }
    child_ = -1;
    if (config_.on_child) config_.on_child(0);
    finish();
    return r;
  }

 private:
  // Replies to write orders; EOF means CMD ended: unless we asked, dlock
  // stopped it (a loss) or it died.
  void read_loop(const std::function<void()>& on_lost) {
    std::string line;
    bool eof = false;
    while (!eof) {
      eof = !read_line(conn_, buf_, line);
      std::lock_guard<std::mutex> g(mu_);
      if (eof) {
        ended_ = true;
        if (!releasing_ && on_lost) on_lost();
      } else {
        replies_.push_back(line);
      }
      cv_.notify_all();
    }
  }

  void finish() {
    if (reader_.joinable()) reader_.join();
    if (conn_ >= 0) ::close(conn_);
    conn_ = -1;
    buf_.clear();
    replies_.clear();
  }

  void abandon() {
    ::kill(child_, SIGKILL);
    ::waitpid(child_, nullptr, 0);
    child_ = -1;
    if (conn_ >= 0) ::shutdown(conn_, SHUT_RDWR);
    finish();
  }

  StrategyConfig config_;
  std::string dlock_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  pid_t child_ = -1;
  int conn_ = -1;
  std::string buf_;
  std::thread reader_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> replies_;
  bool ended_ = true;
  bool releasing_ = false;
};

}  // namespace

std::unique_ptr<Strategy> make_cli_run(const StrategyConfig& config) { return std::make_unique<CliRun>(config); }

int cli_cmd_main(std::uint16_t port, std::uint16_t resource_port) {
  const char* fence = std::getenv("DLOCK_FENCE");
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (fence == nullptr || fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 2;
  if (!write_all(fd, std::string("fence ") + fence + "\n")) return 2;
  dlock::tools::SyncRedis res("127.0.0.1", resource_port, milliseconds(5000));
  std::string buf, line;
  while (read_line(fd, buf, line)) {
    if (line.rfind("write ", 0) != 0) continue;
    auto f = res.cmd({"EVAL", kFencedWriteLua, "2", "reg:max", "reg:seq", line.substr(6)});
    long long accepted = -1, seq = 0, useq = -1;
    if (f.good() && f.elements.size() == 2) {
      accepted = f.elements[0].integer;
      seq = f.elements[1].integer;
    }
    auto u = res.cmd({"EVAL", kUnfencedWriteLua, "1", "ureg:seq"});
    if (u.good()) useq = u.integer;
    if (!write_all(fd, std::to_string(accepted) + " " + std::to_string(seq) + " " + std::to_string(useq) + "\n")) break;
  }
  return 0;
}

}  // namespace torture

#include "strategies_peers.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>

#include "common/spawn.hpp"
#include "common/sync_redis.hpp"
#include "line_socket.hpp"
#include "server_proc.hpp"

namespace torture {
namespace {

using std::chrono::milliseconds;

class RedisPyPeer final : public Strategy {
 public:
  explicit RedisPyPeer(const StrategyConfig& c)
      : config_(c), resource_("127.0.0.1", c.resource_port, milliseconds(5000)) {
    std::uint16_t control = 0;
    listen_fd_ = listen_loopback(control, "redis-py peer");
    // Debian's python3-redis is /usr/bin/python3's.
    const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
    pid_ = dlock::tools::spawn({python, std::string(DLOCK_TORTURE_PEERS_DIR) + "/redispy_peer.py",
                                std::to_string(control), std::to_string(c.ports.at(0)), kTortureUser, kTorturePassword,
                                c.key, std::to_string(c.ttl_ms)});
    std::string line;
    for (int i = 0; i < 200 && conn_ < 0; ++i) {  // 10 s for python to start
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) conn_ = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    }
    if (conn_ < 0) {
      stop();
      throw std::runtime_error("redis-py peer: its helper did not connect (is python3-redis installed?)");
    }
  }
  ~RedisPyPeer() override { stop(); }

  AcquireResult acquire(milliseconds wait, std::function<void()>) override {
    // redis-py learns nothing of a lost lock: on_lost is never called.
    std::string answer;
    if (!ask("acquire " + std::to_string(wait.count()), wait.count() + config_.ttl_ms + 2000, answer))
      return {Outcome::info, 0, "redis-py: no answer (" + answer + ")"};
    if (answer == "ok") return {Outcome::ok, 0, "redis-py Lock: no fence"};
    if (answer == "busy") return {Outcome::fail, 0, "redis-py Lock: not acquired within the wait"};
    return {Outcome::info, 0, "redis-py: " + answer};  // an error mid-call: its SET may have run
  }

  ReleaseResult release() override {
    std::string answer;
    if (!ask("release", config_.ttl_ms + 2000, answer)) return {Outcome::info, "redis-py: no answer (" + answer + ")"};
    if (answer == "ok") return {Outcome::ok, {}};
    if (answer.rfind("fail", 0) == 0) return {Outcome::fail, "redis-py: " + answer};
    return {Outcome::info, "redis-py: " + answer};
  }

  // No fence to send: the fenced register is not written (an unknown write,
  // as the report shows it), the unfenced one is.
  std::optional<RegisterWrites> write_registers(std::uint64_t) override {
    RegisterWrites w;
    w.detail = "a redis-py grant has no fence: the fenced register is not written";
    auto u = resource_.cmd({"INCR", "ureg:seq"});
    if (u.good()) w.unfenced_seq = u.integer;
    return w;
  }

 private:
  bool ask(const std::string& request, std::int64_t timeout_ms, std::string& answer) {
    if (!write_all(conn_, request + "\n")) {
      answer = "its helper is gone";
      return false;
    }
    if (read_line_within(conn_, buf_, answer, timeout_ms)) return true;
    answer = "its helper did not answer within " + std::to_string(timeout_ms) + " ms";
    // A late answer would be taken for the next request's: start afresh.
    stop();
    return false;
  }

  void stop() {
    if (conn_ >= 0) ::close(conn_);
    conn_ = -1;
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      dlock::tools::wait_exit(pid_, milliseconds(5000));
    }
    pid_ = -1;
    if (listen_fd_ >= 0) ::close(listen_fd_);
    listen_fd_ = -1;
  }

  StrategyConfig config_;
  dlock::tools::SyncRedis resource_;
  int listen_fd_ = -1;
  int conn_ = -1;
  pid_t pid_ = -1;
  std::string buf_;
};

}  // namespace

std::unique_ptr<Strategy> make_redispy_peer(const StrategyConfig& config) {
  return std::make_unique<RedisPyPeer>(config);
}

}  // namespace torture

#include "strategies_peers.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "common/spawn.hpp"
#include "common/sync_redis.hpp"
#include "line_socket.hpp"
#include "server_proc.hpp"

namespace torture {
namespace {

using std::chrono::milliseconds;

// A peer library's helper (tools/torture/peers/), driven line by line over
// a loopback control socket: "acquire WAIT_MS" or "release", answered "ok",
// "busy", "fail TEXT" or "error TEXT".
class LinePeer final : public Strategy {
 public:
  // `args` follow the helper's control port on its command line.
  // `interpreter` runs `script` (tools/torture/peers/).
  LinePeer(const StrategyConfig& c, std::string side, const std::string& interpreter, const std::string& script,
           const std::string& module, const std::vector<std::string>& args)
      : config_(c), side_(std::move(side)), resource_("127.0.0.1", c.resource_port, milliseconds(5000)) {
    std::uint16_t control = 0;
    listen_fd_ = listen_loopback(control, side_ + " peer");
    std::vector<std::string> argv{interpreter, std::string(DLOCK_TORTURE_PEERS_DIR) + "/" + script,
                                  std::to_string(control)};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = dlock::tools::spawn(argv);
    if (c.on_child) c.on_child(pid_);             // paused with its worker (RunCtx::pause)
    for (int i = 0; i < 200 && conn_ < 0; ++i) {  // 10 s for python to start
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) conn_ = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    }
    if (conn_ < 0) {
      stop();
      throw std::runtime_error(side_ + " peer: its helper did not connect (is " + module + " installed?)");
    }
  }
  ~LinePeer() override { stop(); }

  AcquireResult acquire(milliseconds wait, std::function<void()>) override {
    // The peers learn nothing of a lost lock: on_lost is never called.
    std::string answer;
    if (!ask("acquire " + std::to_string(wait.count()), wait.count() + config_.ttl_ms + 2000, answer))
      return {Outcome::info, 0, side_ + ": no answer (" + answer + ")"};
    if (answer == "ok") return {Outcome::ok, 0, side_ + " Lock: no fence"};
    if (answer == "busy") return {Outcome::fail, 0, side_ + " Lock: not acquired within the wait"};
    return {Outcome::info, 0, side_ + ": " + answer};  // an error mid-call: its write may have run
  }

  ReleaseResult release() override {
    std::string answer;
    if (!ask("release", config_.ttl_ms + 2000, answer)) return {Outcome::info, side_ + ": no answer (" + answer + ")"};
    if (answer == "ok") return {Outcome::ok, {}};
    if (answer.rfind("fail", 0) == 0) return {Outcome::fail, side_ + ": " + answer};
    return {Outcome::info, side_ + ": " + answer};
  }

  // No fence to send: the fenced register is not written (an unknown write,
  // as the report shows it), the unfenced one is.
  std::optional<RegisterWrites> write_registers(std::uint64_t) override {
    RegisterWrites w;
    w.detail = "a " + side_ + " grant has no fence: the fenced register is not written";
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
      if (config_.on_child) config_.on_child(0);
      ::kill(pid_, SIGKILL);
      dlock::tools::wait_exit(pid_, milliseconds(5000));
    }
    pid_ = -1;
    if (listen_fd_ >= 0) ::close(listen_fd_);
    listen_fd_ = -1;
  }

  StrategyConfig config_;
  std::string side_;
  dlock::tools::SyncRedis resource_;
  int listen_fd_ = -1;
  int conn_ = -1;
  pid_t pid_ = -1;
  std::string buf_;
};

}  // namespace

// Debian's python3-* modules are /usr/bin/python3's.
std::string python() { return std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3"; }

std::unique_ptr<Strategy> make_redispy_peer(const StrategyConfig& c) {
  return std::make_unique<LinePeer>(c, "redis-py", python(), "redispy_peer.py", "python3-redis",
                                    std::vector<std::string>{std::to_string(c.ports.at(0)), kTortureUser,
                                                             kTorturePassword, c.key, std::to_string(c.ttl_ms)});
}

std::unique_ptr<Strategy> make_kazoo_peer(const StrategyConfig& c, const std::string& path) {
  std::string hosts;
  for (std::size_t i = 0; i < c.ports.size(); ++i) hosts += (i ? "," : "") + c.host + ":" + std::to_string(c.ports[i]);
  return std::make_unique<LinePeer>(c, "kazoo", python(), "kazoo_peer.py", "python3-kazoo",
                                    std::vector<std::string>{hosts, path, std::to_string(c.ttl_ms)});
}

std::unique_ptr<Strategy> make_redisson_peer(const StrategyConfig& c) {
  return std::make_unique<LinePeer>(c, "redisson", "node", "redisson_peer.mjs", "node-redisson ($DLOCK_PEERS_MODULES)",
                                    std::vector<std::string>{std::to_string(c.ports.at(0)), kTortureUser,
                                                             kTorturePassword, c.key, std::to_string(c.ttl_ms)});
}

std::unique_ptr<Strategy> make_redlock_peer(const StrategyConfig& c) {
  return std::make_unique<LinePeer>(c, "redlock", "node", "redlock_peer.mjs", "npm redlock ($DLOCK_PEERS_MODULES)",
                                    std::vector<std::string>{std::to_string(c.ports.at(0)), kTortureUser,
                                                             kTorturePassword, c.key, std::to_string(c.ttl_ms)});
}

bool node_peer_installed(const std::string& package) {
  const char* dir = std::getenv("DLOCK_PEERS_MODULES");
  return dir != nullptr && std::filesystem::exists(std::filesystem::path(dir) / "node_modules" / package);
}

}  // namespace torture

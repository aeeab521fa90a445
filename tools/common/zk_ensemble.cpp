#include "common/zk_ensemble.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <thread>

#include "common/child_process.hpp"

namespace dlock::tools {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kJar = "/usr/share/java/zookeeper.jar";
const std::string kExited = "lost a server while starting";

// Reaps `pid`, waiting up to `limit`; false if it is still running.
bool reap(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    int st = 0;
    const pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
}

// Sends a four-letter command and reads the reply to EOF, all within
// `limit`: a server starting up may accept and never answer (a known 3.8
// trap), so nothing here blocks. "" on any failure.
std::string four_letter(int port, const char* cmd, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return "";
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  auto wait_for = [&](short events) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    return ::poll(&p, 1, static_cast<int>(left)) == 1 && (p.revents & (events | POLLHUP | POLLERR)) != 0;
  };
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (errno != EINPROGRESS || !wait_for(POLLOUT)) return "";
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return "";
  }
  if (::send(fd, cmd, std::strlen(cmd), MSG_NOSIGNAL) != static_cast<ssize_t>(std::strlen(cmd))) return "";
  std::string out;
  char buf[1024];
  while (wait_for(POLLIN)) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return n == 0 ? out : "";
    out.append(buf, static_cast<std::size_t>(n));
  }
  return "";  // timed out before EOF
}

}  // namespace

bool zookeeper_available() { return fs::exists(kJar) && std::system("command -v java >/dev/null 2>&1") == 0; }

ZooKeeperEnsemble::ZooKeeperEnsemble(int servers, const std::string& parent)
    : ZooKeeperEnsemble(servers, parent, nullptr) {}

ZooKeeperEnsemble::ZooKeeperEnsemble(int servers, const std::string& parent, PeerRoute route)
    : route_(std::move(route)) {
  if (servers < 1) throw std::invalid_argument("an ensemble needs at least one server");
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = (parent.empty() ? std::string(base && *base ? base : "/tmp") : parent) + "/dlock-zk-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
  dir_ = tmpl;
  nodes_.resize(static_cast<std::size_t>(servers));
  // A port picked free may be taken by another process before the server
  // binds it (tests start many servers at once): a server that exits while
  // starting is started again on fresh ports. Not with routed links, whose
  // proxies were made for the first ports.
  for (int attempt = 1;; ++attempt) {
    for (auto& n : nodes_) {
      n.client_port = free_port();
      n.quorum_port = free_port();
      n.election_port = free_port();
    }
    std::string why;
    try {
      for (int i = 0; i < servers; ++i) {
        fs::create_directories(dir_ + "/" + std::to_string(i) + "/data");
        std::ofstream(dir_ + "/" + std::to_string(i) + "/data/myid") << i + 1 << '\n';
        write_config(i);
        start(i);
      }
      why = wait_started(60s);
    } catch (...) {
      for (int i = 0; i < size(); ++i) kill(i);
      throw;
    }
    if (why.empty()) return;
    const std::string log_end = log_tail(0, 600);
    for (int i = 0; i < size(); ++i) kill(i);
    if (why == kExited && attempt < 3 && !route_) continue;
    throw std::runtime_error("the ZooKeeper ensemble " + why + "; logs in " + dir_ +
                             "; server 1's log ends: " + log_end);
  }
}

// "" once a quorum serves; kExited as soon as a server has exited (it
// could not bind, or died), or "did not serve within ...".
std::string ZooKeeperEnsemble::wait_started(std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    for (auto& n : nodes_) {
      int st = 0;
      if (n.pid > 0 && ::waitpid(n.pid, &st, WNOHANG) == n.pid) {
        n.pid = -1;
        return kExited;
      }
    }
    if (wait_serving(0ms)) return "";
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(100ms);
  }
  return "did not serve within " + std::to_string(limit.count() / 1000) + " s";
}

std::string ZooKeeperEnsemble::log_tail(int i, std::size_t bytes) const {
  std::ifstream in(dir_ + "/" + std::to_string(i) + "/zk.log", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

ZooKeeperEnsemble::~ZooKeeperEnsemble() {
  for (int i = 0; i < size(); ++i) {
    try {
      kill(i);
    } catch (...) {
    }
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void ZooKeeperEnsemble::write_config(int i) const {
  const std::string d = dir_ + "/" + std::to_string(i);
  std::ofstream cfg(d + "/zoo.cfg");
  // Keep comments on lines of their own: values are read to the line's end.
  cfg << "tickTime=" << kTickMs << "\n"
      << "initLimit=50\n"
      << "syncLimit=25\n"
      << "minSessionTimeout=400\n"
      << "maxSessionTimeout=60000\n"
      << "dataDir=" << d << "/data\n"
      << "clientPort=" << nodes_[i].client_port << "\n"
      << "clientPortAddress=127.0.0.1\n"
      << "maxClientCnxns=0\n"
      << "# otherwise the Jetty AdminServer binds port 8080\n"
      << "admin.enableServer=false\n"
      << "4lw.commands.whitelist=srvr,ruok,stat,mntr,cons\n";
  auto port = [&](int k, int p) { return k == i || !route_ ? p : route_(i, k, p); };
  if (size() > 1)
    for (int k = 0; k < size(); ++k)
      cfg << "server." << k + 1 << "=127.0.0.1:" << port(k, nodes_[k].quorum_port) << ":"
          << port(k, nodes_[k].election_port) << "\n";
  if (!cfg) throw std::runtime_error("cannot write " + d + "/zoo.cfg");
}

void ZooKeeperEnsemble::start(int i) {
  Node& n = nodes_.at(i);
  if (n.pid > 0) return;
  const std::string d = dir_ + "/" + std::to_string(i);
  // A server still looking for a quorum re-sends its votes with a backoff
  // that doubles up to 60 s by default: one that found its peers not yet
  // listening (started first, or through a proxy) could then stay out of
  // the quorum for most of a minute after the others formed it. 2 s keeps
  // it rejoining within a few seconds.
  // Its own group, SIGKILL with its parent thread: a crashed caller leaves
  // no server behind.
  SpawnOptions options;
  options.output_file = d + "/zk.log";
  n.pid = tools::spawn(
      {"java", "-Xms32m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
       "-Dzookeeper.fastleader.maxNotificationInterval=2000", "-cp",
       "/etc/zookeeper/conf:" + kJar + ":/usr/share/java/slf4j-simple.jar", "-Dzookeeper.log.dir=" + d,
       "-Dzookeeper.root.logger=INFO,CONSOLE", "org.apache.zookeeper.server.quorum.QuorumPeerMain", d + "/zoo.cfg"},
      options);
}

void ZooKeeperEnsemble::stop(int i) {
  Node& n = nodes_.at(i);
  if (n.pid <= 0) return;
  ::kill(n.pid, SIGCONT);
  ::kill(n.pid, SIGTERM);
  if (!reap(n.pid, 10s)) {
    ::kill(n.pid, SIGKILL);
    reap(n.pid, 10s);
  }
  n.pid = -1;
}

void ZooKeeperEnsemble::kill(int i) {
  Node& n = nodes_.at(i);
  if (n.pid <= 0) return;
  ::kill(n.pid, SIGCONT);
  ::kill(n.pid, SIGKILL);
  reap(n.pid, 10s);
  n.pid = -1;
}

void ZooKeeperEnsemble::restart_all() {
  for (int i = 0; i < size(); ++i) kill(i);
  for (int i = 0; i < size(); ++i) start(i);
}

// Returns once the server is stopped (stop_process).
void ZooKeeperEnsemble::pause(int i) { stop_process(nodes_.at(i).pid); }

void ZooKeeperEnsemble::resume(int i) {
  if (nodes_.at(i).pid > 0) ::kill(nodes_[i].pid, SIGCONT);
}

std::string ZooKeeperEnsemble::hosts() const {
  std::string h;
  for (const auto& n : nodes_) h += (h.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(n.client_port);
  return h;
}

std::string ZooKeeperEnsemble::mode(int i) const {
  if (nodes_.at(i).pid <= 0) return "";
  const std::string r = tools::four_letter(nodes_[i].client_port, "srvr", 2s);
  const auto at = r.find("Mode: ");
  if (at == std::string::npos) return "";
  return r.substr(at + 6, r.find('\n', at) - at - 6);
}

std::string ZooKeeperEnsemble::four_letter(int i, const char* cmd) const {
  if (nodes_.at(i).pid <= 0) return "";
  return tools::four_letter(nodes_[i].client_port, cmd, 2s);
}

int ZooKeeperEnsemble::leader() const {
  for (int i = 0; i < size(); ++i)
    if (mode(i) == "leader") return i;
  return -1;
}

bool ZooKeeperEnsemble::wait_serving(std::chrono::milliseconds limit) const {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    for (int i = 0; i < size(); ++i) {
      const std::string m = mode(i);
      if (m == "leader" || m == "standalone") return true;
    }
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(100ms);
  }
}

}  // namespace dlock::tools

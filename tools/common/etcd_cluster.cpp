#include "common/etcd_cluster.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dlock::tools {
namespace {

using namespace std::chrono_literals;

std::string http_url(int port) { return "http://127.0.0.1:" + std::to_string(port); }

bool on_path(const char* program) {
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "/usr/bin:/bin";
  for (std::size_t at = 0; at <= dirs.size();) {
    const auto colon = std::min(dirs.find(':', at), dirs.size());
    if (std::filesystem::exists(dirs.substr(at, colon - at) + "/" + program)) return true;
    at = colon + 1;
  }
  return false;
}

const Env kApi3{{"ETCDCTL_API", "3"}};

}  // namespace

bool etcd_available() { return on_path("etcd") && on_path("etcdctl"); }

EtcdCluster::EtcdCluster(Options options) : options_(std::move(options)) {
  std::string tmpl = (options_.parent.empty() ? std::string("/tmp") : options_.parent) + "/dlock-etcd-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("etcd: mkdtemp failed in " + tmpl);
  dir_ = tmpl;
  for (int i = 0; i < options_.members; ++i) {
    client_ports_.push_back(free_port());
    peer_ports_.push_back(free_port());
    advertised_.push_back(options_.peer_route ? options_.peer_route(i, peer_ports_.back()) : peer_ports_.back());
    initial_ += (i ? ",n" : "n") + std::to_string(i + 1) + "=" + http_url(advertised_.back());
  }
  members_.resize(client_ports_.size());
  try {
    if (options_.make_tls) options_.make_tls(dir_);
    for (int i = 0; i < size(); ++i) start(i);
  } catch (...) {
    stop();
    throw;
  }
  // Healthy: every member answers and the cluster has a leader. Up to a
  // minute, as a busy 2-core machine running other suites may need.
  const auto until = std::chrono::steady_clock::now() + 60s;
  for (;;) {
    const auto r = etcdctl({"endpoint", "health"}, 5s);
    if (r.exit_code == 0) break;
    if (std::chrono::steady_clock::now() > until) {
      const std::string why = r.timed_out ? "etcdctl endpoint health timed out" : r.err + r.out;
      stop();
      throw std::runtime_error("etcd: the cluster did not become healthy in 60 s: " + why);
    }
    std::this_thread::sleep_for(100ms);
  }
}

std::vector<std::string> EtcdCluster::member_argv(int i) const {
  const std::string name = "n" + std::to_string(i + 1);
  std::vector<std::string> argv{"etcd"};
  if (!options_.fsync) argv.push_back("--unsafe-no-fsync");
  auto flag = [&](const char* f, const std::string& v) {
    argv.push_back(std::string("--") + f);
    argv.push_back(v);
  };
  const auto at = static_cast<std::size_t>(i);
  flag("name", name);
  flag("data-dir", dir_ + "/" + name);
  const std::string client = (options_.make_tls ? "https" : "http") + http_url(client_ports_[at]).substr(4);
  flag("listen-client-urls", client);
  flag("advertise-client-urls", client);
  if (options_.make_tls) {  // clients must show a certificate of the CA
    flag("cert-file", dir_ + "/server.crt");
    flag("key-file", dir_ + "/server.key");
    flag("trusted-ca-file", dir_ + "/ca.crt");
    argv.push_back("--client-cert-auth");
  }
  flag("listen-peer-urls", http_url(peer_ports_[at]));
  flag("initial-advertise-peer-urls", http_url(advertised_[at]));
  flag("initial-cluster", initial_);
  flag("initial-cluster-state", "new");
  flag("initial-cluster-token", "dlock-private");
  flag("logger", "zap");
  flag("log-outputs", dir_ + "/" + name + ".log");
  argv.insert(argv.end(), options_.extra.begin(), options_.extra.end());
  return argv;
}

void EtcdCluster::start(int i) {
  SpawnOptions spawn_options;
  spawn_options.output_file = dir_ + "/n" + std::to_string(i + 1) + ".out";
  members_.at(static_cast<std::size_t>(i)).pid = spawn(member_argv(i), spawn_options);
}

EtcdCluster::~EtcdCluster() { stop(); }

void EtcdCluster::stop() {
  for (auto& m : members_) {
    if (m.pid > 0) ::kill(m.pid, SIGCONT);  // a paused member would not see SIGTERM
    stop_child(m);
  }
  members_.clear();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  dir_.clear();
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (int p : client_ports_) out.push_back("127.0.0.1:" + std::to_string(p));
  return out;
}

std::string EtcdCluster::endpoint_list() const {
  std::string out;
  for (const auto& e : endpoints()) out += (out.empty() ? "" : ",") + e;
  return out;
}

std::string EtcdCluster::url(const std::string& path) const {
  const std::string where = endpoint_list() + (path.empty() ? "" : "/" + path);
  if (!options_.make_tls) return "etcd://" + where;
  return "etcd+tls://" + where + "?cacert=" + dir_ + "/ca.crt&cert=" + dir_ + "/client.crt&key=" + dir_ + "/client.key";
}

std::vector<std::string> EtcdCluster::etcdctl_argv(const std::string& endpoints) const {
  std::vector<std::string> argv{"etcdctl", "--endpoints=" + endpoints};
  if (options_.make_tls)
    argv.insert(argv.end(),
                {"--cacert=" + dir_ + "/ca.crt", "--cert=" + dir_ + "/client.crt", "--key=" + dir_ + "/client.key"});
  return argv;
}

std::vector<std::pair<std::string, std::uint64_t>> EtcdCluster::keys(const std::string& prefix) const {
  const auto r = etcdctl({"get", prefix, "--prefix", "--sort-by=CREATE", "--order=ASCEND", "-w", "fields"});
  std::vector<std::pair<std::string, std::uint64_t>> out;
  std::istringstream in(r.out);
  std::string line, key;
  while (std::getline(in, line)) {
    if (line.rfind("\"Key\" : ", 0) == 0) key = line.substr(9, line.size() - 10);
    if (line.rfind("\"CreateRevision\" : ", 0) == 0) out.emplace_back(key, std::stoull(line.substr(19)));
  }
  return out;
}

Child EtcdCluster::etcdctl_spawn(const std::vector<std::string>& args, const std::string& output_file) const {
  std::vector<std::string> argv = etcdctl_argv(endpoint_list());
  argv.insert(argv.end(), args.begin(), args.end());
  SpawnOptions spawn_options;
  spawn_options.env = kApi3;
  spawn_options.output_file = dir_ + "/" + output_file;
  return Child{.pid = spawn(argv, spawn_options)};
}

int EtcdCluster::leader() const {
  const auto eps = endpoints();
  for (std::size_t i = 0; i < eps.size(); ++i) {
    if (members_.at(i).pid < 0) continue;
    std::vector<std::string> argv = etcdctl_argv(eps[i]);
    argv.insert(argv.end(), {"--command-timeout=2s", "endpoint", "status", "-w", "fields"});
    const auto r = run(argv, std::chrono::seconds(5), kApi3);
    std::istringstream in(r.out);
    std::string line, member, leader;
    while (std::getline(in, line)) {
      if (line.rfind("\"MemberID\" : ", 0) == 0) member = line.substr(13);
      if (line.rfind("\"Leader\" : ", 0) == 0) leader = line.substr(11);
    }
    if (!member.empty() && member == leader) return static_cast<int>(i);
  }
  return -1;
}

int EtcdCluster::watch_streams(int i) const {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval limit{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(client_port(i)));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string ask = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, ask.data(), ask.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(ask.size())) {
      char buf[16384];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) reply.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  const std::string gauge = "\netcd_debugging_mvcc_watch_stream_total ";
  const auto at = reply.find(gauge);
  if (at == std::string::npos) return -1;
  return std::atoi(reply.c_str() + at + gauge.size());
}

bool EtcdCluster::wait_leader(std::chrono::milliseconds limit) const {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (leader() >= 0) return true;
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(100ms);
  }
}

// Never kill(-1, ...): that would signal every process this one may.
// Returns once every thread of the member is stopped: a member asked at
// once may still answer otherwise (a frozen-member test's call went through).
void EtcdCluster::pause(int i) { stop_process(pid(i)); }
void EtcdCluster::resume(int i) {
  if (pid(i) > 0) ::kill(pid(i), SIGCONT);
}
void EtcdCluster::kill(int i) { kill_child(members_.at(static_cast<std::size_t>(i))); }

RunResult EtcdCluster::etcdctl(const std::vector<std::string>& args, std::chrono::milliseconds timeout,
                               int only) const {
  std::vector<std::string> argv =
      etcdctl_argv(only < 0 ? endpoint_list() : endpoints().at(static_cast<std::size_t>(only)));
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, timeout, kApi3);
}

}  // namespace dlock::tools

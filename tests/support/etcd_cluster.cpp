#include "support/etcd_cluster.hpp"

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/redis_server.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

std::string http_url(int port) { return "http://127.0.0.1:" + std::to_string(port); }

bool on_path(const char* program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (std::size_t at = 0; at <= dirs.size();) {
    const auto colon = std::min(dirs.find(':', at), dirs.size());
    if (std::filesystem::exists(dirs.substr(at, colon - at) + "/" + program)) return true;
    at = colon + 1;
  }
  return false;
}

}  // namespace

bool etcd_available() { return on_path("etcd") && on_path("etcdctl"); }

EtcdCluster::EtcdCluster(int members, bool tls, std::vector<std::string> extra) : tls_(tls), extra_(std::move(extra)) {
  char tmpl[] = "/tmp/dlock-etcd-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("etcd: mkdtemp failed");
  dir_ = tmpl;
  std::string initial;
  for (int i = 0; i < members; ++i) {
    client_ports_.push_back(free_port());
    peer_ports_.push_back(free_port());
    initial += (i ? "," : "") + std::string("n") + std::to_string(i + 1) + "=" + http_url(peer_ports_.back());
  }
  try {
    if (tls_) {
      make_ca(dir_, "ca");
      make_leaf(dir_, "server", "127.0.0.1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
      make_leaf(dir_, "client", "dlock-test-client", "extendedKeyUsage=clientAuth\n");
    }
    start(members, initial);
  } catch (...) {
    stop();
    throw;
  }
  // Healthy: every member answers and the cluster has a leader.
  const auto until = std::chrono::steady_clock::now() + 20s;
  for (;;) {
    const auto r = etcdctl({"endpoint", "health"}, 5s);
    if (r.exit_code == 0) break;
    if (std::chrono::steady_clock::now() > until) {
      const std::string why = r.err + r.out;
      stop();
      throw std::runtime_error("etcd: the cluster did not become healthy in 20 s: " + why);
    }
    std::this_thread::sleep_for(100ms);
  }
}

void EtcdCluster::start(int members, const std::string& initial) {
  for (int i = 0; i < members; ++i) {
    const std::string name = "n" + std::to_string(i + 1);
    std::vector<std::string> argv{"etcd", "--unsafe-no-fsync"};
    auto flag = [&](const char* f, const std::string& v) {
      argv.push_back(std::string("--") + f);
      argv.push_back(v);
    };
    flag("name", name);
    flag("data-dir", dir_ + "/" + name);
    const std::string client = (tls_ ? "https" : "http") + http_url(client_ports_[i]).substr(4);
    flag("listen-client-urls", client);
    flag("advertise-client-urls", client);
    if (tls_) {
      // Clients must show a certificate of the CA.
      flag("cert-file", dir_ + "/server.crt");
      flag("key-file", dir_ + "/server.key");
      flag("trusted-ca-file", dir_ + "/ca.crt");
      argv.push_back("--client-cert-auth");
    }
    flag("listen-peer-urls", http_url(peer_ports_[i]));
    flag("initial-advertise-peer-urls", http_url(peer_ports_[i]));
    flag("initial-cluster", initial);
    flag("initial-cluster-state", "new");
    flag("initial-cluster-token", "dlock-test");
    flag("logger", "zap");
    flag("log-outputs", dir_ + "/" + name + ".log");
    argv.insert(argv.end(), extra_.begin(), extra_.end());
    members_.push_back(spawn(argv, {}, dir_ + "/" + name + ".out"));
  }
}

EtcdCluster::~EtcdCluster() { stop(); }

void EtcdCluster::stop() {
  for (auto& m : members_) tools::stop_child(m);
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
  if (!tls_) return "etcd://" + where;
  return "etcd+tls://" + where + "?cacert=" + dir_ + "/ca.crt&cert=" + dir_ + "/client.crt&key=" + dir_ + "/client.key";
}

std::vector<std::string> EtcdCluster::etcdctl_argv(const std::string& endpoints) const {
  std::vector<std::string> argv{"etcdctl", "--endpoints=" + endpoints};
  if (tls_)
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
  return spawn(argv, {{"ETCDCTL_API", "3"}}, dir_ + "/" + output_file);
}

int EtcdCluster::leader() const {
  const auto eps = endpoints();
  for (std::size_t i = 0; i < eps.size(); ++i) {
    std::vector<std::string> argv = etcdctl_argv(eps[i]);
    argv.insert(argv.end(), {"endpoint", "status", "-w", "fields"});
    const auto r = run(argv, std::chrono::seconds(5), {{"ETCDCTL_API", "3"}});
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

void EtcdCluster::pause(int i) { ::kill(members_.at(static_cast<std::size_t>(i)).pid, SIGSTOP); }
void EtcdCluster::resume(int i) { ::kill(members_.at(static_cast<std::size_t>(i)).pid, SIGCONT); }

RunResult EtcdCluster::etcdctl(const std::vector<std::string>& args, std::chrono::milliseconds timeout) const {
  std::vector<std::string> argv = etcdctl_argv(endpoint_list());
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, timeout, {{"ETCDCTL_API", "3"}});
}

}  // namespace dlock::test

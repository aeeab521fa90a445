#include "support/redis_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "common/child_process.hpp"
#include "support/process.hpp"

namespace dlock::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kHost = "127.0.0.1";
constexpr const char* kReadyLine = "Ready to accept connections";
constexpr milliseconds kToolTimeout{30000};  // openssl
constexpr milliseconds kCliTimeout{10000};

constexpr const char* kDirPrefix = "dlock-redis-";

bool keep_temp_dirs() {
  const char* keep = std::getenv("DLOCK_TEST_KEEP_TMP");
  return keep != nullptr && *keep != '\0' && std::string(keep) != "0";
}

std::string temp_base() {
  const char* base = std::getenv("TMPDIR");
  return base != nullptr && *base != '\0' ? base : "/tmp";
}

std::string make_temp_dir() {
  static std::once_flag swept;
  if (!keep_temp_dirs()) std::call_once(swept, remove_stale_server_dirs);
  std::string tmpl = temp_base() + "/" + kDirPrefix + "XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("mkdtemp(" + tmpl + "): " + std::strerror(errno));
  }
  std::ofstream(tmpl + "/owner") << ::getpid() << '\n';
  return tmpl;
}

// Size of a file, 0 if missing.
std::uintmax_t file_size(const std::string& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  return ec ? 0 : size;
}

// The contents of `path` from byte `offset` on.
std::string read_from(const std::string& path, std::uintmax_t offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(static_cast<std::streamoff>(offset));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string tail_lines(const std::string& text, int lines) {
  std::size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (int i = 0; i < lines && pos > 0; ++i) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return text.substr(pos == 0 ? 0 : pos + 1);
}

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n";
  auto begin = s.find_first_not_of(ws);
  if (begin == std::string::npos) return {};
  return s.substr(begin, s.find_last_not_of(ws) - begin + 1);
}

std::string percent_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

void run_tool(const std::vector<std::string>& argv) {
  RunResult r = run(argv, kToolTimeout);
  if (r.exit_code != 0) {
    throw std::runtime_error("'" + join_args(argv) + "' failed (exit " + std::to_string(r.exit_code) +
                             (r.timed_out ? ", timed out" : "") + "): " + trim(r.err + r.out));
  }
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

void make_key(const std::string& path) {
  // EC keys: as good as RSA for these tests and about 40x faster to make.
  run_tool({"openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path});
}

std::string random_serial() {
  std::random_device rd;
  std::uniform_int_distribution<unsigned long long> dist(1, (1ULL << 62));
  return std::to_string(dist(rd));
}

// Sends PING on a plain connection; true on any reply but -LOADING.
bool ping_plain(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, kHost, &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) return false;
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 500) != 1) return false;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return false;
  }
  static const char ping[] = "*1\r\n$4\r\nPING\r\n";
  if (::send(fd, ping, sizeof ping - 1, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof ping - 1)) return false;
  std::string reply;
  const auto deadline = Clock::now() + milliseconds(1000);
  while (reply.find("\r\n") == std::string::npos) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) != 1) return false;
    char buf[256];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    reply.append(buf, static_cast<std::size_t>(n));
  }
  if (reply[0] == '+') return true;
  return reply[0] == '-' && reply.compare(0, 8, "-LOADING") != 0;
}

}  // namespace

// Each directory names its owner's pid in the file "owner". Conservative: a
// directory without that file, or whose owner pid exists, is left alone.
void remove_stale_server_dirs() {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(temp_base(), ec)) {
    if (entry.path().filename().string().rfind(kDirPrefix, 0) != 0) continue;
    std::ifstream owner(entry.path() / "owner");
    long pid = 0;
    if (!(owner >> pid) || pid <= 0 || pid == ::getpid()) continue;
    if (fs::exists("/proc/" + std::to_string(pid), ec)) continue;
    fs::remove_all(entry.path(), ec);
  }
}

int free_port() { return tools::free_port(); }

namespace {
bool port_free(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, kHost, &addr.sin_addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}
}  // namespace

int free_port_pair(int offset) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int p = free_port();
    if (p + offset <= 65535 && port_free(p + offset)) return p;
  }
  throw std::runtime_error("free_port_pair: no free pair of ports " + std::to_string(offset) + " apart");
}

std::string make_ca(const std::string& dir, const std::string& name) {
  const std::string base = dir + "/" + name;
  make_key(base + ".key");
  run_tool({"openssl", "req", "-x509", "-new", "-key", base + ".key", "-sha256", "-days", "3650", "-subj",
            "/CN=dlock test CA " + name, "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
            "keyUsage=critical,keyCertSign,cRLSign", "-out", base + ".crt"});
  return base + ".crt";
}

void make_leaf(const std::string& dir, const std::string& name, const std::string& cn, const std::string& extensions) {
  const std::string base = dir + "/" + name;
  make_key(base + ".key");
  run_tool({"openssl", "req", "-new", "-key", base + ".key", "-subj", "/CN=" + cn, "-out", base + ".csr"});
  write_file(base + ".ext", extensions);
  run_tool({"openssl", "x509", "-req", "-in", base + ".csr", "-CA", dir + "/ca.crt", "-CAkey", dir + "/ca.key",
            "-set_serial", random_serial(), "-days", "365", "-sha256", "-extfile", base + ".ext", "-out",
            base + ".crt"});
}

RedisServer::RedisServer(RedisServerOptions options) : options_(std::move(options)), dir_(make_temp_dir()) {
  try {
    if (options_.tls) make_certificates();
    constexpr int kAttempts = 5;
    for (int attempt = 1;; ++attempt) {
      port_ = options_.cluster_bus ? free_port_pair(10000) : free_port();
      if (launch() == Launch::ready) return;
      if (attempt == kAttempts) {
        throw std::runtime_error("redis-server: the free port was taken " + std::to_string(kAttempts) +
                                 " times in a row; last attempt:\n" + log_tail());
      }
    }
  } catch (...) {
    kill9();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
}

RedisServer::~RedisServer() {
  try {
    stop();
  } catch (...) {
  }
  if (!keep_temp_dirs()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

void RedisServer::make_certificates() {
  make_ca(dir_, "ca");
  make_leaf(dir_, "server", kHost,
            "basicConstraints=CA:FALSE\n"
            "keyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=serverAuth\n"
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  if (options_.tls_client_auth) {
    make_leaf(dir_, "client", "dlock-test-client",
              "basicConstraints=CA:FALSE\n"
              "keyUsage=critical,digitalSignature\n"
              "extendedKeyUsage=clientAuth\n");
  }
}

std::vector<std::string> RedisServer::command_line() const {
  const std::string port = std::to_string(port_);
  std::vector<std::string> argv = {"redis-server"};
  if (!options_.config_file.empty()) argv.push_back(options_.config_file);
  if (options_.tls) {
    argv.insert(argv.end(), {"--port", "0", "--tls-port", port, "--tls-cert-file", dir_ + "/server.crt",
                             "--tls-key-file", dir_ + "/server.key", "--tls-ca-cert-file", ca_file(),
                             "--tls-auth-clients", options_.tls_client_auth ? "yes" : "no"});
  } else {
    argv.insert(argv.end(), {"--port", port});
  }
  argv.insert(argv.end(), {"--bind", kHost, "--dir", dir_, "--logfile", log_file(), "--save", "", "--appendonly", "no",
                           "--daemonize", "no"});
  if (options_.enable_debug) argv.insert(argv.end(), {"--enable-debug-command", "local"});
  if (!options_.requirepass.empty()) argv.insert(argv.end(), {"--requirepass", options_.requirepass});
  for (const auto& rule : options_.acl_rules) {
    argv.emplace_back("--user");
    for (auto& word : split_words(rule)) argv.push_back(std::move(word));
  }
  argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
  return argv;
}

RedisServer::Launch RedisServer::launch() {
  const std::string out_file = dir_ + "/redis.out";
  const auto log_start = file_size(log_file());
  const auto out_start = file_size(out_file);
  const std::vector<std::string> argv = command_line();
  pid_ = spawn(argv, {}, out_file).pid;

  const auto deadline = Clock::now() + options_.start_timeout;
  auto nap = milliseconds(2);
  for (;;) {
    const std::string log = read_from(log_file(), log_start);
    int code = wait_exit(pid_, milliseconds(0));
    if (code != -1) {
      pid_ = -1;
      const std::string out = read_from(out_file, out_start);
      if (log.find("Address already in use") != std::string::npos ||
          out.find("Address already in use") != std::string::npos) {
        return Launch::port_in_use;
      }
      throw std::runtime_error("redis-server exited with status " + std::to_string(code) +
                               " during startup.\ncommand: " + join_args(argv) + "\n" + log_tail());
    }
    // The ready line proves that *our* process has bound the port; the PING
    // that it answers. A sentinel logs no ready line; its mode line comes
    // after its ports are bound.
    const bool bound = log.find(kReadyLine) != std::string::npos ||
                       log.find("Running mode=sentinel, port=" + std::to_string(port_)) != std::string::npos;
    if (bound && probe()) return Launch::ready;
    if (Clock::now() >= deadline) {
      kill9();
      throw std::runtime_error("redis-server did not answer PING within " +
                               std::to_string(options_.start_timeout.count()) + " ms.\ncommand: " + join_args(argv) +
                               "\n" + log_tail());
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, milliseconds(50));
  }
}

bool RedisServer::probe() const {
  if (!options_.tls) return ping_plain(port_);
  try {
    std::string reply = cli({"PING"});
    return reply.rfind("LOADING", 0) != 0;
  } catch (const std::runtime_error&) {
    return false;
  }
}

std::string RedisServer::url() const {
  std::string url = (options_.tls ? "rediss://" : "redis://") + host_port();
  if (options_.tls) {
    url += "?cacert=" + ca_file();
    if (options_.tls_client_auth) url += "&cert=" + client_cert_file() + "&key=" + client_key_file();
  }
  return url;
}

std::string RedisServer::url_with_auth(const std::string& user, const std::string& password) const {
  std::string u = url();
  const auto at = u.find("://") + 3;
  return u.insert(at, percent_encode(user) + ":" + percent_encode(password) + "@");
}

std::string RedisServer::host_port() const { return std::string(kHost) + ":" + std::to_string(port_); }

std::string RedisServer::ca_file() const { return options_.tls ? dir_ + "/ca.crt" : std::string(); }

std::string RedisServer::client_cert_file() const {
  return options_.tls && options_.tls_client_auth ? dir_ + "/client.crt" : std::string();
}

std::string RedisServer::client_key_file() const {
  return options_.tls && options_.tls_client_auth ? dir_ + "/client.key" : std::string();
}

std::string RedisServer::log_tail(int lines) const {
  std::string text = "--- " + log_file() + " (last " + std::to_string(lines) + " lines) ---\n" +
                     tail_lines(read_from(log_file(), 0), lines);
  const std::string out = trim(read_from(dir_ + "/redis.out", 0));
  if (!out.empty()) text += "\n--- process output ---\n" + tail_lines(out, lines);
  return text;
}

void RedisServer::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  ::kill(pid_, SIGCONT);  // a paused server would never see the SIGTERM
  if (wait_exit(pid_, milliseconds(5000)) == -1) {
    ::kill(pid_, SIGKILL);
    wait_exit(pid_, milliseconds(5000));
  }
  pid_ = -1;
  paused_ = false;
}

void RedisServer::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  wait_exit(pid_, milliseconds(10000));
  pid_ = -1;
  paused_ = false;
}

void RedisServer::start() {
  // It may have ended by itself (SHUTDOWN, crash), perhaps just now.
  if (pid_ > 0 && wait_exit(pid_, milliseconds(200)) != -1) {
    pid_ = -1;
    paused_ = false;
  }
  if (running()) throw std::logic_error("RedisServer::start: already running (pid " + std::to_string(pid_) + ")");
  // The port may be briefly taken (e.g. by an outgoing connection's
  // ephemeral port); it must stay the same, so wait for it.
  const auto deadline = Clock::now() + milliseconds(5000);
  while (launch() == Launch::port_in_use) {
    if (Clock::now() >= deadline) {
      throw std::runtime_error("RedisServer::start: port " + std::to_string(port_) + " is taken by another process\n" +
                               log_tail());
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
}

void RedisServer::pause() {
  if (pid_ <= 0) throw std::logic_error("RedisServer::pause: not running");
  if (paused_) return;  // a second SIGSTOP would not be reported: waitpid would hang
  ::kill(pid_, SIGSTOP);
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WUNTRACED);
    if (r < 0 && errno == EINTR) continue;
    if (r == pid_ && WIFSTOPPED(status)) {
      paused_ = true;
      return;
    }
    pid_ = -1;  // it died (or is not our child any more)
    throw std::runtime_error("RedisServer::pause: redis-server is gone\n" + log_tail());
  }
}

void RedisServer::resume() {
  if (pid_ <= 0) throw std::logic_error("RedisServer::resume: not running");
  ::kill(pid_, SIGCONT);
  paused_ = false;
}

std::string RedisServer::cli(const std::vector<std::string>& args) const {
  if (options_.requirepass.empty()) return cli_impl({}, args);
  return cli_impl({"", options_.requirepass}, args);
}

std::string RedisServer::cli_as(const std::string& user, const std::string& password,
                                const std::vector<std::string>& args) const {
  return cli_impl({user, password}, args);
}

std::string RedisServer::cli_impl(const std::vector<std::string>& auth, const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"redis-cli", "-h", kHost, "-p", std::to_string(port_)};
  if (options_.tls) {
    argv.insert(argv.end(), {"--tls", "--cacert", ca_file()});
    if (options_.tls_client_auth) argv.insert(argv.end(), {"--cert", client_cert_file(), "--key", client_key_file()});
  }
  Env env;
  if (!auth.empty()) {
    if (!auth[0].empty()) argv.insert(argv.end(), {"--user", auth[0]});
    env["REDISCLI_AUTH"] = auth[1];  // keeps the password out of argv and messages
  }
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult r = run(argv, kCliTimeout, env);
  if (r.exit_code != 0) {
    throw std::runtime_error("'" + join_args(argv) + "' failed (exit " + std::to_string(r.exit_code) +
                             (r.timed_out ? ", timed out" : "") + "): " + trim(r.err + r.out));
  }
  return trim(r.out);
}

}  // namespace dlock::test

// tests/support/redis_server.hpp: a private redis-server per test.
//
//   dlock::test::RedisServer server;                      // plain, free port
//   auto client = dlock::Client::connect(server.url());
//   server.stop();  server.start();                       // same port, data gone
//   server.pause(); /* SIGSTOP: replies never come */ server.resume();
//   EXPECT_EQ(server.cli({"GET", "k"}), "v");
//
//   dlock::test::RedisServerOptions tls;
//   tls.tls = true;                                       // rediss://...?cacert=...
//   tls.requirepass = "s3cret";
//   tls.acl_rules = {"alice on >secret ~* &* +@all"};
//   dlock::test::RedisServer secure(tls);
//
// Each server is a direct, non-daemonized child process (in its own process
// group) listening on 127.0.0.1 only, with its own temporary directory
// holding redis.log, the output of the process (redis.out) and, with TLS, a
// throw-away CA and server certificate. Nothing is persisted: a restart
// starts empty. The destructor stops exactly that process and removes the
// directory (set DLOCK_TEST_KEEP_TMP=1 to keep it). If the test process
// dies, the server gets SIGKILL too (when it was started from the main
// thread; see process.hpp), and the next test process removes the directory.
//
// Thread safety: none; use one RedisServer from one thread at a time
// (const accessors such as url() may be called concurrently).
#ifndef DLOCK_TESTS_SUPPORT_REDIS_SERVER_HPP_
#define DLOCK_TESTS_SUPPORT_REDIS_SERVER_HPP_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace dlock::test {

struct RedisServerOptions {
  // TLS only: --port 0 --tls-port P, a server certificate for 127.0.0.1 and
  // localhost signed by a throw-away CA (ca_file()), --tls-auth-clients no.
  bool tls = false;
  // With tls: require client certificates (--tls-auth-clients yes); a client
  // certificate signed by the same CA is made (client_cert_file(),
  // client_key_file()) and url() names it.
  bool tls_client_auth = false;
  // Password of the default user (--requirepass); empty: none.
  std::string requirepass;
  // ACL users, one rule string each ("alice on >secret ~* &* +@all"), passed
  // as `--user alice on >secret ~* &* +@all`: split at whitespace, so
  // passwords cannot contain spaces.
  std::vector<std::string> acl_rules;
  // --enable-debug-command local (DEBUG SLEEP, DEBUG SET-ACTIVE-EXPIRE...).
  bool enable_debug = true;
  // Appended to the command line as they are ("--maxmemory", "1mb").
  std::vector<std::string> extra_args;
  // A cluster node: its port is at most 55535 and port + 10000 (the
  // cluster bus) is free too when it starts.
  bool cluster_bus = false;
  // A configuration file, given first on the command line (a sentinel
  // needs one it may rewrite); the options above still apply after it.
  std::string config_file;
  // How long the constructor and start() wait for the server to answer PING.
  std::chrono::milliseconds start_timeout{10000};
};

class RedisServer {
 public:
  // Makes the temp dir (and certificates), picks a free port and starts the
  // server, waiting until it answers PING. If the port was taken meanwhile it
  // retries on another one. Throws std::runtime_error with the log tail if
  // the server does not come up (or redis-server/openssl are missing).
  explicit RedisServer(RedisServerOptions options = {});
  // Stops the process (if running) and removes the temp dir. Never throws.
  ~RedisServer();

  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  // "redis://127.0.0.1:P", or "rediss://127.0.0.1:P?cacert=<dir>/ca.crt"
  // (plus "&cert=...&key=..." with tls_client_auth). No credentials.
  std::string url() const;
  // url() with "user:password@" (percent-encoded); an empty user gives
  // ":password@" (the default user).
  std::string url_with_auth(const std::string& user, const std::string& password) const;
  // "127.0.0.1:P"
  std::string host_port() const;
  const std::string& dir() const { return dir_; }
  // The CA certificate that signed the server's (TLS only; else empty).
  std::string ca_file() const;
  // The client certificate and key (tls_client_auth only; else empty).
  std::string client_cert_file() const;
  std::string client_key_file() const;
  std::string log_file() const { return dir_ + "/redis.log"; }
  // The last `lines` lines of redis.log and of the process's own output.
  std::string log_tail(int lines = 30) const;
  const RedisServerOptions& options() const { return options_; }
  // The server's pid; -1 while stopped.
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  bool paused() const { return paused_; }

  // SIGTERM (and SIGCONT, in case it is paused), wait up to 5 s for it to
  // exit, then SIGKILL. No-op when stopped. Data is gone (no persistence).
  void stop();
  // SIGKILL and reap: a crash. No-op when stopped.
  void kill9();
  // (Re)starts on the same port with the same options and waits until it
  // answers; also after the server ended by itself (SHUTDOWN, DEBUG
  // SEGFAULT). Throws std::logic_error if running, std::runtime_error if it
  // does not come up (retrying for a while if the port is briefly taken).
  void start();
  // SIGSTOP / SIGCONT: the server keeps its connections but answers nothing.
  // pause() returns once the process is stopped. Both are no-ops if already
  // in that state; they throw std::logic_error when the server is stopped.
  void pause();
  void resume();

  // Runs `redis-cli` against this server (TLS aware, authenticated with
  // requirepass if set) with a 10 s timeout and returns its trimmed stdout
  // (one line per reply element, no "(integer)" decorations). Throws
  // std::runtime_error if redis-cli fails or times out. Note that redis-cli
  // exits 0 on error replies: the text ("ERR ...") is returned.
  std::string cli(const std::vector<std::string>& args) const;
  // The same, authenticated as an ACL user.
  std::string cli_as(const std::string& user, const std::string& password, const std::vector<std::string>& args) const;

 private:
  enum class Launch { ready, port_in_use };
  Launch launch();  // one attempt on port_
  std::string cli_impl(const std::vector<std::string>& auth, const std::vector<std::string>& args) const;
  std::vector<std::string> command_line() const;
  bool probe() const;  // answers PING (any reply other than LOADING)
  void make_certificates();

  RedisServerOptions options_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  bool paused_ = false;
};

// A free TCP port on 127.0.0.1 (bind port 0, read it, close). Another
// process may take it before you bind it: retry on failure.
int free_port();
// A free port P <= 65535 - offset with P + offset free as well.
int free_port_pair(int offset);

// Makes a self-signed CA "<dir>/<name>.crt" (key "<dir>/<name>.key") with the
// openssl CLI and returns the certificate's path; e.g. a second CA for
// "wrong CA" tests. Throws std::runtime_error on failure.
std::string make_ca(const std::string& dir, const std::string& name);

// Makes "<dir>/<name>.key" and "<dir>/<name>.crt" for common name `cn`,
// signed by the CA "<dir>/ca.{key,crt}" (make_ca(dir, "ca")), with the
// x509v3 `extensions` (one per line). Throws std::runtime_error on failure.
void make_leaf(const std::string& dir, const std::string& name, const std::string& cn, const std::string& extensions);

// Removes the temp directories of RedisServers whose test process died
// before the destructor ran (their servers died with them). Done once per
// process by the first RedisServer unless DLOCK_TEST_KEEP_TMP is set.
void remove_stale_server_dirs();

}  // namespace dlock::test

#endif  // DLOCK_TESTS_SUPPORT_REDIS_SERVER_HPP_

// The limit for rediss://: a minimal TLS client doing the plain hiredis
// loop's round trips. One blocking socket, OpenSSL for the session (the
// server's certificate verified against the URL's cacert, its address
// checked), hiredis's reply parser and command formatter. Debian 12's
// hiredis (0.14) has no TLS of its own; this is what it would do with it.
// Nothing here is dlock's code.
#pragma once

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::bench {

using ReplyPtr = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;

class TlsLimitConn {
 public:
  // url: rediss://127.0.0.1:PORT?cacert=PATH (an IPv4 address; no credentials).
  explicit TlsLimitConn(const std::string& url) {
    const auto start = url.find("://") + 3;
    const std::string hostport = url.substr(start, url.find_first_of("/?", start) - start);
    const std::string host = hostport.substr(0, hostport.rfind(':'));
    const int port = std::stoi(hostport.substr(hostport.rfind(':') + 1));
    std::string ca;
    if (auto p = url.find("cacert="); p != std::string::npos) ca = url.substr(p + 7, url.find('&', p) - p - 7);
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<std::uint16_t>(port));
    if (fd_ < 0 || ::inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1 ||
        ::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
      throw std::runtime_error("the TLS limit cannot connect to " + hostport);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    if (ca.empty() ? SSL_CTX_set_default_verify_paths(ctx_) != 1
                   : SSL_CTX_load_verify_locations(ctx_, ca.c_str(), nullptr) != 1)
      throw std::runtime_error("the TLS limit cannot load its CA");
    ssl_ = SSL_new(ctx_);
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), host.c_str());
    SSL_set_fd(ssl_, fd_);
    if (SSL_connect(ssl_) != 1) throw std::runtime_error("the TLS limit's handshake failed");
    reader_ = redisReaderCreate();
  }
  ~TlsLimitConn() {
    if (reader_ != nullptr) redisReaderFree(reader_);
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    if (fd_ >= 0) ::close(fd_);
  }
  TlsLimitConn(const TlsLimitConn&) = delete;
  TlsLimitConn& operator=(const TlsLimitConn&) = delete;

  // The commands in one write, then one reply each; throws on any failure.
  std::vector<ReplyPtr> roundtrip(const std::vector<std::vector<std::string>>& commands) {
    out_.clear();
    for (const auto& argv : commands) {
      std::vector<const char*> args;
      std::vector<size_t> lens;
      for (const auto& s : argv) {
        args.push_back(s.data());
        lens.push_back(s.size());
      }
      char* cmd = nullptr;
      const int len = redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), args.data(), lens.data());
      if (len < 0) throw std::runtime_error("cannot format a command");
      out_.append(cmd, static_cast<std::size_t>(len));
      redisFreeCommand(cmd);
    }
    if (SSL_write(ssl_, out_.data(), static_cast<int>(out_.size())) != static_cast<int>(out_.size()))
      throw std::runtime_error("the TLS limit's write failed");
    std::vector<ReplyPtr> replies;
    while (replies.size() < commands.size()) {
      void* reply = nullptr;
      if (redisReaderGetReply(reader_, &reply) != REDIS_OK) throw std::runtime_error("a bad reply");
      if (reply != nullptr) {
        replies.emplace_back(static_cast<redisReply*>(reply), freeReplyObject);
        continue;
      }
      const int n = SSL_read(ssl_, buf_, sizeof buf_);
      if (n <= 0) throw std::runtime_error("the TLS limit's read failed");
      redisReaderFeed(reader_, buf_, static_cast<std::size_t>(n));
    }
    return replies;
  }

 private:
  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  redisReader* reader_ = nullptr;
  std::string out_;
  char buf_[16 * 1024];
};

}  // namespace dlock::bench

#include "redis/tls.hpp"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace dlock::redis {
namespace {

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

bool is_ip_literal(const std::string& host) {
  unsigned char addr[16];
  return ::inet_pton(AF_INET, host.c_str(), addr) == 1 || ::inet_pton(AF_INET6, host.c_str(), addr) == 1;
}

// The socket BIO with its write made by send(MSG_NOSIGNAL): OpenSSL's own
// uses write(), which raises SIGPIPE when the server has gone.
int write_nosignal(BIO* b, const char* data, int n) {
  BIO_clear_retry_flags(b);
  const ssize_t w = ::send(static_cast<int>(BIO_get_fd(b, nullptr)), data, static_cast<std::size_t>(n), MSG_NOSIGNAL);
  if (w <= 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_write(b);
  return static_cast<int>(w);
}

// Its read: recv(), without waiting when the session's caller asks so.
int read_maybe_nowait(BIO* b, char* out, int n) {
  BIO_clear_retry_flags(b);
  const auto* nowait = static_cast<const bool*>(BIO_get_data(b));
  const ssize_t r = ::recv(static_cast<int>(BIO_get_fd(b, nullptr)), out, static_cast<std::size_t>(n),
                           nowait != nullptr && *nowait ? MSG_DONTWAIT : 0);
  if (r <= 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_read(b);
#ifdef BIO_FLAGS_IN_EOF
  if (r == 0) BIO_set_flags(b, BIO_FLAGS_IN_EOF);
#endif
  return static_cast<int>(r);
}

BIO_METHOD* nosignal_socket_method() {
  static BIO_METHOD* const method = [] {
    const BIO_METHOD* socket = BIO_s_socket();
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "dlock socket");
    if (m == nullptr) return m;
    BIO_meth_set_write(m, write_nosignal);
    BIO_meth_set_read(m, read_maybe_nowait);
    BIO_meth_set_puts(m, BIO_meth_get_puts(socket));
    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(socket));
    BIO_meth_set_create(m, BIO_meth_get_create(socket));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(socket));
    return m;
  }();
  return method;
}

}  // namespace

Status configure_client_tls(ssl_ctx_st* ctx, const detail::RedisEndpoint& ep) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (!ep.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, ep.ca_file.c_str(), nullptr) != 1)
      return {Errc::invalid_argument, "cannot load CA file '" + ep.ca_file + "': " + openssl_error()};
  } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    return {Errc::tls_failed, "cannot load the system's trusted certificates: " + openssl_error()};
  }
  if (!ep.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, ep.cert_file.c_str()) != 1)
      return {Errc::invalid_argument, "cannot load certificate '" + ep.cert_file + "': " + openssl_error()};
    if (SSL_CTX_use_PrivateKey_file(ctx, ep.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
      return {Errc::invalid_argument, "cannot load key '" + ep.key_file + "': " + openssl_error()};
    if (SSL_CTX_check_private_key(ctx) != 1)
      return {Errc::invalid_argument,
              "key '" + ep.key_file + "' does not match certificate '" + ep.cert_file + "': " + openssl_error()};
  }
  return {};
}

Result<std::shared_ptr<ssl_ctx_st>> make_client_tls_context(const detail::RedisEndpoint& ep) {
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (!ctx) return Status(Errc::tls_failed, "TLS setup failed: " + openssl_error());
  if (Status s = configure_client_tls(ctx.get(), ep); !s.ok()) return s;
  return ctx;
}

Status expect_peer(ssl_st* ssl, const std::string& host) {
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  if (is_ip_literal(host)) {
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1)
      return {Errc::tls_failed, "TLS setup failed: cannot check the certificate for " + host};
    return {};
  }
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size()) != 1 ||
      SSL_set_tlsext_host_name(ssl, host.c_str()) != 1)
    return {Errc::tls_failed, "TLS setup failed: cannot check the certificate for " + host};
  return {};
}

ssl_st* new_client_session(ssl_ctx_st* ctx, int fd, const std::string& host, const bool* nowait, Status& why) {
  BIO_METHOD* method = nosignal_socket_method();
  SSL* ssl = method != nullptr ? SSL_new(ctx) : nullptr;
  BIO* bio = ssl != nullptr ? BIO_new(method) : nullptr;
  if (bio == nullptr) {
    if (ssl != nullptr) SSL_free(ssl);
    why = Status(Errc::tls_failed, "TLS setup failed: " + openssl_error());
    return nullptr;
  }
  BIO_set_fd(bio, fd, BIO_NOCLOSE);
  BIO_set_data(bio, const_cast<bool*>(nowait));  // the socket BIO keeps nothing there
  SSL_set_bio(ssl, bio, bio);
  if (why = expect_peer(ssl, host); !why.ok()) {
    SSL_free(ssl);
    return nullptr;
  }
  return ssl;
}

std::string session_error(ssl_st* ssl, int rc) {
  const int saved = errno;
  switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_ZERO_RETURN:
      return "the server closed the TLS session";
    case SSL_ERROR_SYSCALL:
      if (ERR_peek_error() != 0) return openssl_error();
      return saved == 0 ? "the server closed the connection" : std::strerror(saved);
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      return "timed out";
    default:
      return openssl_error();
  }
}

bool handshake_cut_short(ssl_st* ssl, int ssl_error, bool transport) {
  bool cut = transport || ssl_error == SSL_ERROR_SYSCALL;
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
  cut = cut || (ssl_error == SSL_ERROR_SSL && ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING);
#endif
  return cut && SSL_get_verify_result(ssl) == X509_V_OK;
}

std::string handshake_failure(ssl_st* ssl, const std::string& why) {
  const long verify = SSL_get_verify_result(ssl);
  if (verify == X509_V_OK) return why;
  return why + " (certificate: " + X509_verify_cert_error_string(verify) + ")";
}

}  // namespace dlock::redis

// Client TLS as every Redis connection makes it, the I/O thread's (Asio) and
// the blocking fast path's (OpenSSL on the caller's thread) alike: one set of
// rules, so the two paths can never verify differently.
#ifndef DLOCK_REDIS_TLS_HPP_
#define DLOCK_REDIS_TLS_HPP_

#include <memory>
#include <string>

#include "dlock/error.hpp"
#include "redis/url.hpp"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX
struct ssl_st;      // OpenSSL's SSL

namespace dlock::redis {

// TLS 1.2 or later, the peer's certificate verified against the endpoint's
// CA file (the system store when none), its client certificate and key
// loaded when given. invalid_argument names a file that cannot be loaded.
Status configure_client_tls(ssl_ctx_st* ctx, const detail::RedisEndpoint& endpoint);

// A context configured as above, for connections made without Asio.
Result<std::shared_ptr<ssl_ctx_st>> make_client_tls_context(const detail::RedisEndpoint& endpoint);

// Per connection, before its handshake: the certificate must name `host`
// (a DNS name, or an IP address among its IP entries), and a name is sent
// as SNI. The host is the one dialled (after a nat map).
Status expect_peer(ssl_st* ssl, const std::string& host);

// A client session over the connected socket `fd` (not owned: the caller
// closes it after SSL_free), its writes made with MSG_NOSIGNAL (a peer gone
// is an error, not a SIGPIPE that kills the process), the peer's name
// expected as above. Its reads wait on a blocking socket unless `*nowait`
// (the caller's, outliving the session) is true then: MSG_DONTWAIT, so a
// record that arrives in pieces cannot hold a read past the caller's
// deadline. nullptr with `why` set on failure.
ssl_st* new_client_session(ssl_ctx_st* ctx, int fd, const std::string& host, const bool* nowait, Status& why);

// After a failed handshake: whether the transport cut it short (the server
// closed or reset the connection, the stream ended mid-record) with nothing
// found wrong in the certificate: a server restarting, refusing clients
// (maxclients) or a link reset, which is unavailable and retried, not a TLS
// fault. `ssl_error`: SSL_get_error's answer; `transport`: the caller saw a
// transport error itself (Asio: eof, reset, a truncated stream).
bool handshake_cut_short(ssl_st* ssl, int ssl_error, bool transport = false);

// Why an SSL_connect/SSL_read/SSL_write that returned `rc` failed, from
// OpenSSL's error queue or errno: for messages.
std::string session_error(ssl_st* ssl, int rc);

// Why a handshake failed, with the certificate check's verdict when it was
// that: "... (certificate: self-signed certificate in certificate chain)".
std::string handshake_failure(ssl_st* ssl, const std::string& why);

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_TLS_HPP_

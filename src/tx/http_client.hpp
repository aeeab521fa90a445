// A small blocking HTTP/1.1 client for TCC participants behind HTTP
// (Boost.Beast): POST with a deadline, keep-alive connections kept per
// origin, TLS with certificate and host name verification.
#ifndef DLOCK_TX_HTTP_CLIENT_HPP_
#define DLOCK_TX_HTTP_CLIENT_HPP_

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::tx::detail {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpUrl {
  bool tls = false;
  std::string host;    // as written (an IPv6 literal without its brackets)
  std::string port;    // "80" / "443" when the URL names none
  std::string target;  // path and query ("/" at least)
};

// http://host[:port][/path][?query] or https://...; nullopt with `error` set
// otherwise (no user info, no fragment).
std::optional<HttpUrl> parse_http_url(std::string_view url, std::string& error);

struct HttpResponse {
  int status = 0;
  std::string body;
};

// The connections to one origin (scheme, host, port). post() may be called
// from many threads: each call takes an idle connection or opens one.
//
// A kept connection is used again only when it is in step: its last answer
// was read whole, framed by its length, with not a byte after it (in the
// buffer, or on the socket when it is taken again, nor the peer's close).
// Anything else (an answer written twice, junk after one, one that cannot
// be framed, 101 Switching Protocols, an answer to another request) closes
// it, so that no call ever reads the bytes of an earlier call's answer.
class HttpOrigin {
 public:
  // ca_file: for https, the only CA trusted ("" = the system's).
  HttpOrigin(const HttpUrl& url, std::string ca_file);
  ~HttpOrigin();
  HttpOrigin(const HttpOrigin&) = delete;
  HttpOrigin& operator=(const HttpOrigin&) = delete;

  // Sends one POST and reads its answer by `deadline` (connecting
  // included; one already passed: nothing is sent). Interim responses
  // (1xx but 101) before the answer are read past. The target gets a
  // request id, "rid=" and 16 hex digits from a CSPRNG, added to its query;
  // an answer whose body carries another ("rid":"...", as handle_http
  // echoes it) is the answer to another request: the connection is closed
  // and the call throws. An answer with no rid is taken as it is.
  //
  // Throws std::runtime_error, whose text names the origin and never a
  // header, when no answer (or no answer of its own) came: the request
  // may or may not have been acted on. A kept connection that the server
  // had closed is replaced once, if not a byte of the answer came.
  HttpResponse post(const std::string& target, const std::string& body, std::string_view content_type,
                    const Headers& headers, std::chrono::steady_clock::time_point deadline);

 private:
  struct Conn;
  std::unique_ptr<Conn> connect(std::chrono::steady_clock::time_point deadline);
  std::unique_ptr<Conn> take_idle();
  std::string where() const;

  HttpUrl url_;
  std::string ca_file_;
  std::shared_ptr<void> ssl_;  // boost::asio::ssl::context, made on first use
  std::mutex mu_;
  std::vector<std::unique_ptr<Conn>> idle_;
};

// The rid an answer's body carries ({"dtm_result":"SUCCESS","rid":"..."}):
// a top-level "rid" key whose value is 16 lowercase hex digits, as the
// coordinator makes them. nullopt otherwise: a third party's "rid" of
// another shape, or nested in an object of its own, is not ours.
std::optional<std::string_view> echoed_rid(std::string_view body);
std::optional<std::string_view> echoed_rid(std::string_view body);

}  // namespace dlock::tx::detail

#endif  // DLOCK_TX_HTTP_CLIENT_HPP_

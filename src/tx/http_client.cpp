#include "tx/http_client.hpp"

#include <poll.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdio>
#include <stdexcept>

#include "core/token.hpp"
#include "core/url_parts.hpp"

namespace dlock::tx::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kMaxAnswer = 1 << 20;  // a participant's answer is a status word
constexpr std::size_t kMaxIdle = 16;         // kept connections per origin
constexpr int kMaxInterim = 8;               // 1xx responses read past before an answer

// The host as a URL or a Host header writes it: an IPv6 address in brackets.
std::string bracketed(const std::string& host) { return host.find(':') != std::string::npos ? "[" + host + "]" : host; }

bool is_ip_literal(const std::string& host) {
  beast::error_code ec;
  (void)asio::ip::make_address(host, ec);
  return !ec;
}

// Runs the io_context until the operation started by `start` has called
// its handler (the deadline is the stream's, or the timer's for a resolve).
template <class Start>
void run(asio::io_context& io, Start&& start) {
  io.restart();
  start();
  io.run();
}

struct ExchangeError : std::runtime_error {
  ExchangeError(const std::string& what, bool none_came) : std::runtime_error(what), before_answer(none_came) {}
  bool before_answer;  // not a byte of the answer came: a stale kept connection
};

// 16 hex digits from the CSPRNG: a request's id.
std::string new_rid() {
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(dlock::detail::random_u64()));
  return out;
}

std::string describe(const beast::error_code& ec, std::chrono::milliseconds timeout) {
  if (ec == beast::error::timeout || ec == asio::error::operation_aborted)
    return "no answer within " + std::to_string(timeout.count()) + " ms";
  return ec.message();
}

}  // namespace

std::optional<HttpUrl> parse_http_url(std::string_view url, std::string& error) {
  HttpUrl out;
  std::string_view rest;
  if (url.starts_with("http://")) {
    rest = url.substr(7);
  } else if (url.starts_with("https://")) {
    rest = url.substr(8);
    out.tls = true;
  } else {
    error = "not an http:// or https:// URL";
    return std::nullopt;
  }
  if (rest.find('#') != std::string_view::npos) {
    error = "a fragment (#) has no meaning here";
    return std::nullopt;
  }
  const auto slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  out.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (out.target.front() == '?') out.target.insert(0, "/");
  if (authority.find('@') != std::string_view::npos) {
    error = "user info in an HTTP URL is not supported: pass credentials as a header";
    return std::nullopt;
  }
  std::string_view port;
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) {
      error = "an IPv6 address without its ']'";
      return std::nullopt;
    }
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && (after.front() != ':' || after.size() == 1)) {
      error = "garbage after the IPv6 address";
      return std::nullopt;
    }
    if (!after.empty()) port = after.substr(1);
  } else {
    const auto colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty()) {
    error = "no host";
    return std::nullopt;
  }
  unsigned n = 0;
  if (!port.empty() && (!dlock::detail::parse_int(port, n) || n == 0 || n > 65535)) {
    error = "bad port '" + std::string(port) + "'";
    return std::nullopt;
  }
  out.port = port.empty() ? (out.tls ? "443" : "80") : std::string(port);
  return out;
}

struct HttpOrigin::Conn {
  asio::io_context io;
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  beast::flat_buffer buffer;

  beast::tcp_stream& lowest() { return plain ? *plain : beast::get_lowest_layer(*secure); }

  // Nothing is waiting to be read: no byte in the buffer, in TLS's, or on
  // the socket, and the peer has not closed it. Only such a connection can
  // carry a new request (a byte there would be read as part of its answer).
  bool quiet() {
    if (buffer.size() != 0) return false;
    if (secure && SSL_pending(secure->native_handle()) > 0) return false;
    pollfd p{lowest().socket().native_handle(), POLLIN | POLLRDHUP, 0};
    return ::poll(&p, 1, 0) == 0;
  }

  // Sends `req` and reads its answer, past interim (1xx) responses. `reuse`:
  // the connection is in step for another request (the answer was framed
  // by its length, kept alive, and nothing came after it).
  template <class Stream>
  HttpResponse exchange(Stream& s, http::request<http::string_body>& req, Clock::time_point deadline,
                        std::chrono::milliseconds timeout, bool& reuse) {
    beast::error_code ec;
    lowest().expires_at(deadline);
    run(io, [&] { http::async_write(s, req, [&](beast::error_code e, std::size_t) { ec = e; }); });
    if (ec) throw ExchangeError("sending: " + describe(ec, timeout), true);
    for (int interim = 0;; ++interim) {
      http::response_parser<http::string_body> parser;
      parser.body_limit(kMaxAnswer);
      lowest().expires_at(deadline);
      run(io, [&] { http::async_read(s, buffer, parser, [&](beast::error_code e, std::size_t) { ec = e; }); });
      if (ec) throw ExchangeError("reading the answer: " + describe(ec, timeout), interim == 0 && !parser.got_some());
      const unsigned status = parser.get().result_int();
      if (status == 101)  // what follows is another protocol: no answer can be framed
        throw ExchangeError("answered 101 Switching Protocols: no HTTP answer can follow", false);
      if (status < 100) throw ExchangeError("answered status " + std::to_string(status) + ", not HTTP", false);
      if (status < 200) {  // interim (100 Continue, 103 Early Hints...): the answer follows
        if (interim == kMaxInterim)
          throw ExchangeError("more than " + std::to_string(kMaxInterim) + " interim responses", false);
        continue;
      }
      reuse = parser.keep_alive() && !parser.need_eof() && quiet();
      auto res = parser.release();
      return {static_cast<int>(res.result_int()), std::move(res.body())};
    }
  }
};

HttpOrigin::HttpOrigin(const HttpUrl& url, std::string ca_file) : url_(url), ca_file_(std::move(ca_file)) {
  if (!url_.tls) return;
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  ctx->set_verify_mode(ssl::verify_peer);
  if (ca_file_.empty())
    ctx->set_default_verify_paths();
  else
    ctx->load_verify_file(ca_file_);  // throws: a bad file is the caller's error
  ssl_ = std::move(ctx);
}

HttpOrigin::~HttpOrigin() = default;

std::string HttpOrigin::where() const {
  return std::string(url_.tls ? "https://" : "http://") + bracketed(url_.host) + ":" + url_.port;
}

std::unique_ptr<HttpOrigin::Conn> HttpOrigin::connect(Clock::time_point deadline) {
  auto c = std::make_unique<Conn>();
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  beast::error_code ec;
  if (url_.tls)
    c->secure.emplace(c->io, *std::static_pointer_cast<ssl::context>(ssl_));
  else
    c->plain.emplace(c->io);
  const bool address = is_ip_literal(url_.host);
  if (address) {
    // No lookup (nor the resolver's thread) for an address.
    const tcp::endpoint to(asio::ip::make_address(url_.host), static_cast<unsigned short>(std::stoi(url_.port)));
    c->lowest().expires_at(deadline);
    run(c->io, [&] { c->lowest().async_connect(to, [&](beast::error_code e) { ec = e; }); });
  } else {
    tcp::resolver resolver(c->io);
    tcp::resolver::results_type endpoints;
    {
      asio::steady_timer timer(c->io);  // a resolver has no deadline of its own
      timer.expires_at(deadline);
      run(c->io, [&] {
        timer.async_wait([&](beast::error_code e) {
          if (!e) resolver.cancel();
        });
        resolver.async_resolve(url_.host, url_.port, [&](beast::error_code e, tcp::resolver::results_type r) {
          ec = e;
          endpoints = std::move(r);
          timer.cancel();
        });
      });
    }
    if (ec) throw std::runtime_error("resolving " + url_.host + ": " + describe(ec, timeout));
    c->lowest().expires_at(deadline);
    run(c->io,
        [&] { c->lowest().async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) { ec = e; }); });
  }
  if (ec) throw std::runtime_error("connecting: " + describe(ec, timeout));
  c->lowest().socket().set_option(tcp::no_delay(true));
  if (url_.tls) {
    // SNI for names (never for addresses), and the certificate must name
    // the host: an address must be among its IP addresses.
    if (!address) SSL_set_tlsext_host_name(c->secure->native_handle(), url_.host.c_str());
    c->secure->set_verify_callback(ssl::host_name_verification(url_.host));
    c->lowest().expires_at(deadline);
    run(c->io, [&] { c->secure->async_handshake(ssl::stream_base::client, [&](beast::error_code e) { ec = e; }); });
    if (ec) throw std::runtime_error("TLS handshake: " + describe(ec, timeout));
  }
  return c;
}

std::unique_ptr<HttpOrigin::Conn> HttpOrigin::take_idle() {
  for (;;) {
    std::unique_ptr<Conn> c;
    {
      std::lock_guard lock(mu_);
      if (idle_.empty()) return nullptr;
      c = std::move(idle_.back());
      idle_.pop_back();
    }
    if (c->quiet()) return c;
    // Bytes nobody asked for (a late copy of an answer, junk), or the
    // peer's close: closed here, outside the lock.
  }
}

HttpResponse HttpOrigin::post(const std::string& target, const std::string& body, std::string_view content_type,
                              const Headers& headers, Clock::time_point deadline) {
  const auto start = Clock::now();
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - start);
  if (deadline <= start) throw std::runtime_error("POST " + where() + ": not sent, the call's deadline had passed");
  const std::string rid = new_rid();
  http::request<http::string_body> req{http::verb::post,
                                       target + (target.find('?') == std::string::npos ? "?" : "&") + "rid=" + rid, 11};
  const bool default_port = url_.port == (url_.tls ? "443" : "80");
  req.set(http::field::host, bracketed(url_.host) + (default_port ? "" : ":" + url_.port));
  req.set(http::field::user_agent, "dlock-tx");
  req.set(http::field::content_type, content_type);
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = body;
  req.keep_alive(true);
  req.prepare_payload();

  std::unique_ptr<Conn> c = take_idle();
  try {
    for (bool reused = c != nullptr;; reused = false) {
      if (!c) c = connect(deadline);
      bool reuse = false;
      try {
        HttpResponse r = c->plain ? c->exchange(*c->plain, req, deadline, timeout, reuse)
                                  : c->exchange(*c->secure, req, deadline, timeout, reuse);
        if (const auto echoed = echoed_rid(r.body); echoed && *echoed != rid) {
          c.reset();
          throw std::runtime_error("answered for another request (rid " + std::string(echoed->substr(0, 32)) +
                                   ", not " + rid + "): the connection was out of step and is closed");
        }
        if (reuse) {
          std::lock_guard lock(mu_);
          if (idle_.size() < kMaxIdle) idle_.push_back(std::move(c));
        }
        return r;
      } catch (const ExchangeError& e) {
        c.reset();
        if (!(reused && e.before_answer && Clock::now() < deadline)) throw;
      }
    }
  } catch (const std::exception& e) {
    throw std::runtime_error("POST " + where() + ": " + e.what());
  }
}

std::optional<std::string_view> echoed_rid(std::string_view body) {
  auto ours = [](std::string_view v) {
    return v.size() == 16 && std::all_of(v.begin(), v.end(),
                                         [](char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); });
  };
  auto skip_space = [&](std::size_t i) {
    while (i < body.size() && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n')) ++i;
    return i;
  };
  // The end of the string that opens at `i` (its closing quote), npos if none.
  auto string_end = [&](std::size_t i) {
    for (++i; i < body.size(); ++i) {
      if (body[i] == '\\')
        ++i;
      else if (body[i] == '"')
        return i;
    }
    return std::string_view::npos;
  };
  int depth = 0;
  for (std::size_t i = 0; i < body.size(); ++i) {
    const char ch = body[i];
    if (ch == '{' || ch == '[') {
      ++depth;
    } else if (ch == '}' || ch == ']') {
      --depth;
    } else if (ch == '"') {
      const std::size_t end = string_end(i);
      if (end == std::string_view::npos) return std::nullopt;
      const std::string_view text = body.substr(i + 1, end - i - 1);
      i = end;
      if (depth != 1 || text != "rid") continue;
      std::size_t j = skip_space(end + 1);
      if (j >= body.size() || body[j] != ':') continue;  // "rid" as a value, not a key
      j = skip_space(j + 1);
      if (j >= body.size() || body[j] != '"') continue;
      const std::size_t value_end = string_end(j);
      if (value_end == std::string_view::npos) return std::nullopt;
      const std::string_view value = body.substr(j + 1, value_end - j - 1);
      if (ours(value)) return value;
      i = value_end;
    }
  }
  return std::nullopt;
}

}  // namespace dlock::tx::detail

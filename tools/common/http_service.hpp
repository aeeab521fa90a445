// tools/common/http_service.hpp: a real HTTP/1.1 server on a loopback port
// for participant tests and the order demo's services (a thread per
// connection, keep-alive; a minimal
// HTTP/1.1 reader, enough for the client under test), whose
// handler may answer, or drop the connection without a word, and may put
// wrong bytes on the wire around its answer (an interim response before
// it, the answer twice, junk after it).
#ifndef DLOCK_TOOLS_COMMON_HTTP_SERVICE_HPP_
#define DLOCK_TOOLS_COMMON_HTTP_SERVICE_HPP_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace dlock::tools {

struct HttpAnswer {
  HttpAnswer() = default;
  HttpAnswer(int status_code, std::string text) : status(status_code), body(std::move(text)) {}

  int status = 200;
  std::string body;
  // Raw bytes written before the answer, e.g. an interim response
  // ("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n").
  std::string interim;
  // The answer written a second time (a proxy's retry, a buggy handler).
  bool twice = false;
  // Raw bytes written after the answer (and after its second copy).
  std::string trailing_garbage;
  // How long after the answer what follows it (its second copy, the junk)
  // is written; 0: in the same write. The next request is read only then.
  std::chrono::milliseconds second_after{0};
};

class HttpService {
 public:
  // nullopt: close the connection without answering (the work may be done).
  using Handler = std::function<std::optional<HttpAnswer>(const std::string& target, const std::string& body)>;

  // Listens on 127.0.0.1:port (0: a free one). Throws if it cannot.
  explicit HttpService(Handler handler, int port = 0);
  ~HttpService();  // stops: no handler runs after it returns
  HttpService(const HttpService&) = delete;
  HttpService& operator=(const HttpService&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  int requests() const { return requests_.load(); }

 private:
  void accept_loop();
  void serve(int fd);

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> requests_{0};
  std::mutex mu_;
  std::vector<int> open_fds_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

}  // namespace dlock::tools

#endif  // DLOCK_TOOLS_COMMON_HTTP_SERVICE_HPP_

#include "common/http_service.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace dlock::tools {

namespace {

// Reads one request (its target and body) from `fd`, keeping what follows
// in `buf`; false when the peer closed or the request is malformed.
bool read_request(int fd, std::string& buf, std::string& target, std::string& body, bool& keep_alive) {
  std::size_t end;
  while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
    char chunk[4096];
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n <= 0) return false;
    buf.append(chunk, static_cast<std::size_t>(n));
  }
  std::string head = buf.substr(0, end);
  buf.erase(0, end + 4);
  const auto sp1 = head.find(' '), sp2 = head.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) return false;
  target = head.substr(sp1 + 1, sp2 - sp1 - 1);
  for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::size_t length = 0;
  if (auto at = head.find("\r\ncontent-length:"); at != std::string::npos)
    length = std::stoul(head.substr(at + 17, head.find("\r\n", at + 2) - at - 17));
  keep_alive = head.find("\r\nconnection: close") == std::string::npos;
  while (buf.size() < length) {
    char chunk[4096];
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n <= 0) return false;
    buf.append(chunk, static_cast<std::size_t>(n));
  }
  body = buf.substr(0, length);
  buf.erase(0, length);
  return true;
}

bool write_all(int fd, const std::string& data) {
  for (std::size_t done = 0; done < data.size();) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

HttpService::HttpService(Handler handler, int port) : handler_(std::move(handler)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 64) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("HttpService: cannot listen on port " + std::to_string(port));
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

HttpService::~HttpService() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  acceptor_.join();
  {
    std::lock_guard lock(mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);  // wakes each reader
  }
  for (auto& t : threads_) t.join();
  ::close(listen_fd_);
}

void HttpService::accept_loop() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (stopping_) return;
      continue;
    }
    std::lock_guard lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    open_fds_.push_back(fd);
    threads_.emplace_back([this, fd] { serve(fd); });
  }
}

void HttpService::serve(int fd) {
  std::string buf, target, body;
  bool keep_alive = true;
  while (keep_alive && !stopping_ && read_request(fd, buf, target, body, keep_alive)) {
    ++requests_;
    auto answer = handler_(target, body);
    if (!answer) break;  // dropped without a word
    const std::string reply =
        "HTTP/1.1 " + std::to_string(answer->status) +
        " X\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(answer->body.size()) +
        (keep_alive ? "" : "\r\nConnection: close") + "\r\n\r\n" + answer->body;
    const std::string after = (answer->twice ? reply : "") + answer->trailing_garbage;
    if (answer->second_after > std::chrono::milliseconds::zero() && !after.empty()) {
      if (!write_all(fd, answer->interim + reply)) break;
      std::this_thread::sleep_for(answer->second_after);
      if (!write_all(fd, after)) break;
    } else if (!write_all(fd, answer->interim + reply + after)) {
      break;
    }
  }
  std::lock_guard lock(mu_);  // closed under the lock: the destructor never shuts a reused number
  open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
  ::close(fd);
}

}  // namespace dlock::tools

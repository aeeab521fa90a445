#include "sqlite/wakeups.hpp"

#include <boost/asio/post.hpp>

#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dlock::sqlite {

namespace asio = boost::asio;

Wakeups::Wakeups(asio::io_context& io, std::string db_path) : io_(io) {
  const auto slash = db_path.rfind('/');
  dir_ = slash == 0 ? "/" : db_path.substr(0, slash);
  wake_name_ = db_path.substr(slash + 1) + "-wake";
}

Wakeups::~Wakeups() {
  close();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

Status Wakeups::open(std::function<void()> rung) {
  rung_ = std::move(rung);
  const std::string wake_path = dir_ + "/" + wake_name_;
  wake_fd_ = ::open(wake_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (wake_fd_ < 0) return {Errc::permission_denied, "cannot open " + wake_path + ": " + std::strerror(errno)};
  const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return {Errc::unavailable, std::string("inotify_init1: ") + std::strerror(errno)};
  inotify_ = std::make_unique<asio::posix::stream_descriptor>(io_, fd);
  read_events();
  return {};
}

Status Wakeups::listen(bool on) {
  if (closed_ || !inotify_ || on == (watch_ >= 0)) return {};
  const int fd = inotify_->native_handle();
  if (!on) {
    inotify_rm_watch(fd, watch_);
    watch_ = -1;
    return {};
  }
  // The directory, not the file: a wake file deleted and made again is
  // still seen.
  watch_ = inotify_add_watch(fd, dir_.c_str(), IN_MODIFY);
  if (watch_ < 0) return {Errc::unavailable, "inotify on " + dir_ + ": " + std::strerror(errno)};
  return {};
}

void Wakeups::ring() {
  if (wake_fd_ >= 0) (void)!pwrite(wake_fd_, "", 1, 0);
}

void Wakeups::read_events() {
  inotify_->async_read_some(asio::buffer(buf_), [this](const boost::system::error_code& ec, std::size_t n) {
    if (ec || closed_) return;
    bool ours = false;
    for (std::size_t at = 0; at + sizeof(inotify_event) <= n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf_.data() + at);
      if (ev->len > 0 && wake_name_ == ev->name) ours = true;
      at += sizeof(inotify_event) + ev->len;
    }
    if (ours && rung_) rung_();
    read_events();
  });
}

void Wakeups::watch_process(const std::string& name, const ProcessId& p, std::function<void()> died) {
  if (closed_) return;
  auto it = pids_.find(name);
  if (it != pids_.end() && it->second.pid == p.pid) return;  // already watched
  if (it != pids_.end()) pids_.erase(it);
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, p.pid, 0));
  if (fd < 0) return;  // gone already, or no pidfds here: the lease decides
  // The pid may have been reused between reading the row and opening it.
  if (known_dead(p)) {
    ::close(fd);
    asio::post(io_, std::move(died));
    return;
  }
  Pidfd& w = pids_[name];
  w.pid = p.pid;
  w.fd = std::make_unique<asio::posix::stream_descriptor>(io_, fd);
  w.fd->async_wait(asio::posix::stream_descriptor::wait_read,
                   [this, name, died = std::move(died)](const boost::system::error_code& ec) {
                     if (ec || closed_) return;
                     pids_.erase(name);
                     died();
                   });
}

void Wakeups::forget_process(const std::string& name) { pids_.erase(name); }

void Wakeups::close() {
  if (closed_) return;
  closed_ = true;
  if (inotify_) inotify_->close();
  for (auto& [name, w] : pids_) w.fd->close();
}

}  // namespace dlock::sqlite

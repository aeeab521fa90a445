#include "sqlite/wakeups.hpp"

#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>

namespace dlock::sqlite {

namespace asio = boost::asio;

namespace {

// Always watched: the database file's name deleted, renamed away or to, or
// made. Rare, unlike the modifications of every commit, watched only while
// this process waits.
constexpr std::uint32_t kNameEvents = IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE;

}  // namespace

Wakeups::Wakeups(asio::io_context& io, std::string db_path) : io_(io) {
  const auto slash = db_path.rfind('/');
  dir_ = slash == 0 ? "/" : db_path.substr(0, slash);
  db_name_ = db_path.substr(slash + 1);
  wake_name_ = db_name_ + "-wake";
}

Wakeups::~Wakeups() { close(); }

Status Wakeups::open(std::function<void()> rung, std::function<void()> moved) {
  rung_ = std::move(rung);
  moved_ = std::move(moved);
  const std::string wake_path = dir_ + "/" + wake_name_;
  const int wake_fd = ::open(wake_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (wake_fd < 0) return {Errc::permission_denied, "cannot open " + wake_path + ": " + std::strerror(errno)};
  ::close(wake_fd);
  const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) {
    inotify_status_ = {Errc::unavailable, std::string("no release notifications (inotify_init1: ") +
                                              std::strerror(errno) + "): waits end at the holder's lease"};
    return {};
  }
  inotify_ = std::make_unique<asio::posix::stream_descriptor>(io_, fd);
  if (Status s = set_mask(); !s.ok()) {
    inotify_status_ = s;
    inotify_.reset();
    return {};
  }
  read_events();
  return {};
}

Status Wakeups::set_mask() {
  // The directory, not the file: a wake file deleted and made again is
  // still seen. The same watch (one per directory) gets the new mask.
  watch_ = inotify_add_watch(inotify_->native_handle(), dir_.c_str(), kNameEvents | (listening_ ? IN_MODIFY : 0));
  if (watch_ < 0)
    return {Errc::unavailable, "no release notifications (inotify on " + dir_ + ": " + std::strerror(errno) +
                                   "): waits end at the holder's lease"};
  return {};
}

Status Wakeups::listen(bool on) {
  if (closed_) return {};
  if (!inotify_) return inotify_status_;
  if (on == listening_) return {};
  listening_ = on;
  return set_mask();
}

// Opened each time: the wake file may have been deleted with the database
// (and a new one made by the next process), and a byte into a deleted file
// wakes no one.
void Wakeups::ring() {
  const std::string wake_path = dir_ + "/" + wake_name_;
  const int fd = ::open(wake_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return;
  (void)!pwrite(fd, "", 1, 0);
  ::close(fd);
}

void Wakeups::read_events() {
  inotify_->async_read_some(asio::buffer(buf_), [this](const boost::system::error_code& ec, std::size_t n) {
    if (ec || closed_) return;
    bool rung = false, moved = false;
    for (std::size_t at = 0; at + sizeof(inotify_event) <= n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf_.data() + at);
      if (ev->len > 0 && (ev->mask & IN_MODIFY) && wake_name_ == ev->name) rung = true;
      if (ev->len > 0 && (ev->mask & kNameEvents) && db_name_ == ev->name) moved = true;
      at += sizeof(inotify_event) + ev->len;
    }
    if (moved && moved_) moved_();
    if (rung && rung_ && listening_) rung_();
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

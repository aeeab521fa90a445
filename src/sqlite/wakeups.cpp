#include "sqlite/wakeups.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>

#include "sqlite/wake_hub.hpp"

namespace dlock::sqlite {

namespace asio = boost::asio;

Wakeups::Wakeups(asio::io_context& io, std::string db_path) : io_(io), poll_(io) {
  const auto slash = db_path.rfind('/');
  dir_ = slash == 0 ? "/" : db_path.substr(0, slash);
  db_name_ = db_path.substr(slash + 1);
  wake_name_ = db_name_ + "-wake";
}

Wakeups::~Wakeups() { close(); }

namespace {

// What the wake file says now (each ring writes a value of its own: a
// timestamp may not move between two rings); 0 if it cannot be read.
std::uint64_t wake_value(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  std::uint64_t v = 0;
  (void)!pread(fd, &v, sizeof v, 0);
  ::close(fd);
  return v;
}

}  // namespace

Status Wakeups::open(std::function<void()> rung, std::function<void()> moved) {
  rung_ = rung;
  const std::string wake_path = dir_ + "/" + wake_name_;
  const int wake_fd = ::open(wake_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (wake_fd < 0) return {Errc::permission_denied, "cannot open " + wake_path + ": " + std::strerror(errno)};
  ::close(wake_fd);
  auto sub = std::make_shared<WakeSub>();
  sub->io = &io_;
  sub->dir = dir_;
  sub->wake_name = wake_name_;
  sub->db_name = db_name_;
  sub->rung = std::move(rung);
  sub->moved = std::move(moved);
  if (Status s = wake_hub_join(sub); !s.ok()) {
    inotify_status_ = {s.code(), s.message() + ": a waiter looks at the wake file every " +
                                     std::to_string(kPollEvery.count()) + " ms"};
    return {};
  }
  sub_ = std::move(sub);
  return {};
}

Status Wakeups::listen(bool on) {
  if (closed_ || on == listening_) return {};
  listening_ = on;
  if (sub_) return wake_hub_listen(sub_, on);
  if (!on) {
    poll_.cancel();
    return {};
  }
  seen_ = wake_value(dir_ + "/" + wake_name_);
  poll_soon();
  return {};
}

// Without inotify: a change of the wake file since the last look rings.
void Wakeups::poll_soon() {
  poll_.expires_after(kPollEvery);
  poll_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || closed_ || !listening_) return;
    const std::uint64_t now = wake_value(dir_ + "/" + wake_name_);
    const bool changed = now != seen_;
    seen_ = now;
    poll_soon();
    if (changed && rung_) rung_();
  });
}

// Opened each time: the wake file may have been deleted with the database
// (and a new one made by the next process), and a byte into a deleted file
// wakes no one.
void Wakeups::ring() {
  const std::string wake_path = dir_ + "/" + wake_name_;
  const int fd = ::open(wake_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return;
  static std::atomic<std::uint32_t> rings{0};
  const std::uint64_t v = (static_cast<std::uint64_t>(::getpid()) << 32) | ++rings;
  (void)!pwrite(fd, &v, sizeof v, 0);
  ::close(fd);
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
  poll_.cancel();
  if (sub_) {
    sub_->closed = true;
    wake_hub_leave(sub_);
  }
  for (auto& [name, w] : pids_) w.fd->close();
}

}  // namespace dlock::sqlite

#include "sqlite/wake_hub.hpp"

#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace dlock::sqlite {
namespace {

// Always watched: the database file's name deleted, renamed away or to, or
// made. Rare, unlike the modifications of every commit, watched only while
// a client of the directory waits.
constexpr std::uint32_t kNameEvents = IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE;

class Hub {
 public:
  Hub() {
    // A fork while the reader holds the lock must not leave it held in the
    // child (whose first join would wait forever).
    pthread_atfork([] { hub_mu().lock(); }, [] { hub_mu().unlock(); }, [] { hub_mu().unlock(); });
  }

  Status join(const std::shared_ptr<WakeSub>& sub) {
    // One directory, one watch (inotify's is per inode): keyed by its
    // real path, whatever the spelling.
    if (char* real = ::realpath(sub->dir.c_str(), nullptr)) {
      sub->dir = real;
      ::free(real);
    }
    std::lock_guard lock(mu_);
    if (Status s = open(); !s.ok()) return s;
    Dir& d = dirs_[sub->dir];
    d.subs.push_back(sub);
    if (Status s = set_mask(sub->dir, d); !s.ok()) {
      d.subs.pop_back();
      if (d.subs.empty()) dirs_.erase(sub->dir);
      return s;
    }
    return {};
  }

  Status listen(const std::shared_ptr<WakeSub>& sub, bool on) {
    std::lock_guard lock(mu_);
    if (pid_ != ::getpid()) return {};  // a parent's client, in a forked child
    auto it = dirs_.find(sub->dir);
    if (it == dirs_.end() || sub->listening == on) return {};
    sub->listening = on;
    it->second.listening += on ? 1 : -1;
    return set_mask(it->first, it->second);
  }

  // The last client to leave stops the reader (joined outside the lock):
  // a process that no longer uses SQLite keeps no thread of it, and can
  // fork as it could before.
  void leave(const std::shared_ptr<WakeSub>& sub) {
    std::unique_ptr<std::thread> reader;
    int fd = -1, stop = -1;
    {
      std::lock_guard lock(mu_);
      leave_locked(sub);
      if (!dirs_.empty() || fd_ < 0 || pid_ != ::getpid()) return;
      reader = std::move(reader_);
      fd = std::exchange(fd_, -1);
      stop = std::exchange(stop_, -1);
      by_wd_.clear();
    }
    const std::uint64_t one = 1;
    (void)!::write(stop, &one, sizeof one);
    if (reader) reader->join();
    ::close(fd);
    ::close(stop);
  }

 private:
  void leave_locked(const std::shared_ptr<WakeSub>& sub) {
    if (pid_ != ::getpid()) return;
    auto it = dirs_.find(sub->dir);
    if (it == dirs_.end()) return;
    Dir& d = it->second;
    const auto before = d.subs.size();
    std::erase(d.subs, sub);
    if (d.subs.size() == before) return;
    if (sub->listening) --d.listening;
    sub->listening = false;
    if (!d.subs.empty()) {
      (void)set_mask(it->first, d);
      return;
    }
    if (d.wd >= 0) {
      by_wd_.erase(d.wd);
      inotify_rm_watch(fd_, d.wd);
    }
    dirs_.erase(it);
  }

  struct Dir {
    int wd = -1;
    int listening = 0;
    std::vector<std::shared_ptr<WakeSub>> subs;
  };

  // The instance and its reader, made at the first use in this process (a
  // forked child's is its own: the parent's reader is not in it).
  Status open() {
    if (fd_ >= 0 && pid_ == ::getpid()) return {};
    if (fd_ >= 0) {  // inherited across a fork: nobody reads it here
      ::close(fd_);
      ::close(stop_);
      fd_ = stop_ = -1;
      (void)reader_.release();  // the parent's thread: not in this process
      dirs_.clear();
      by_wd_.clear();
    }
    const int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd < 0)
      return {Errc::unavailable, std::string("no release notifications (inotify_init1: ") + std::strerror(errno) + ")"};
    const int stop = ::eventfd(0, EFD_CLOEXEC);
    if (stop < 0) {
      ::close(fd);
      return {Errc::unavailable, std::string("no release notifications (eventfd: ") + std::strerror(errno) + ")"};
    }
    fd_ = fd;
    stop_ = stop;
    pid_ = ::getpid();
    reader_ = std::make_unique<std::thread>([this, fd, stop] { read_loop(fd, stop); });
    return {};
  }

  Status set_mask(const std::string& dir, Dir& d) {
    // The directory, not the file: a wake file deleted and made again is
    // still seen. The same watch (one per directory) gets the new mask.
    const int wd = inotify_add_watch(fd_, dir.c_str(), kNameEvents | (d.listening > 0 ? IN_MODIFY : 0));
    if (wd < 0)
      return {Errc::unavailable, "no release notifications (inotify on " + dir + ": " + std::strerror(errno) + ")"};
    d.wd = wd;
    by_wd_[wd] = dir;
    return {};
  }

  void read_loop(int fd, int stop) {
    alignas(inotify_event) char buf[8192];
    for (;;) {
      pollfd fds[2] = {{fd, POLLIN, 0}, {stop, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents != 0) return;  // the last client left
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return;
      // Posted under the lock: once leave() returns, nothing more is posted
      // to that client's I/O loop (which may then go).
      std::vector<std::pair<std::shared_ptr<WakeSub>, bool>> tell;  // (sub, moved?) rung otherwise
      {
        std::lock_guard lock(mu_);
        if (fd != fd_) return;  // an instance stopped, or left behind by a fork
        for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
          const auto* ev = reinterpret_cast<const inotify_event*>(buf + at);
          at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
          if (ev->mask & IN_Q_OVERFLOW) {  // events were lost: everyone looks
            for (auto& [path, d] : dirs_)
              for (const auto& sub : d.subs) add(tell, sub, true), add(tell, sub, false);
            continue;
          }
          if (ev->mask & IN_IGNORED) {  // the directory went: its clients look at their file
            forget_watch(ev->wd, tell);
            continue;
          }
          if (ev->len == 0) continue;
          auto dir = by_wd_.find(ev->wd);
          if (dir == by_wd_.end()) continue;
          auto d = dirs_.find(dir->second);
          if (d == dirs_.end()) continue;
          for (const auto& sub : d->second.subs) {
            if ((ev->mask & IN_MODIFY) && sub->listening && sub->wake_name == ev->name) add(tell, sub, false);
            if ((ev->mask & kNameEvents) && sub->db_name == ev->name) add(tell, sub, true);
          }
        }
        for (auto& [sub, moved] : tell)
          boost::asio::post(*sub->io, [sub = sub, moved = moved] {
            if (sub->closed) return;
            if (moved && sub->moved) sub->moved();
            if (!moved && sub->rung) sub->rung();
          });
      }
    }
  }

  // A watch the kernel dropped (its directory deleted): made again at the
  // next change of a client's listening (the directory may be back).
  void forget_watch(int wd, std::vector<std::pair<std::shared_ptr<WakeSub>, bool>>& tell) {
    auto dir = by_wd_.find(wd);
    if (dir == by_wd_.end()) return;
    if (auto d = dirs_.find(dir->second); d != dirs_.end()) {
      if (d->second.wd == wd) d->second.wd = -1;
      for (const auto& sub : d->second.subs) add(tell, sub, true);
    }
    by_wd_.erase(dir);
  }

  static std::mutex& hub_mu();

  // Once per client and kind in a batch of events.
  static void add(std::vector<std::pair<std::shared_ptr<WakeSub>, bool>>& tell, const std::shared_ptr<WakeSub>& sub,
                  bool moved) {
    if (std::find(tell.begin(), tell.end(), std::make_pair(sub, moved)) == tell.end()) tell.emplace_back(sub, moved);
  }

  std::mutex& mu_ = hub_mu();
  int fd_ = -1;    // under mu_
  int stop_ = -1;  // an eventfd: written to stop the reader
  std::unique_ptr<std::thread> reader_;
  pid_t pid_ = 0;  // the process that made fd_
  std::map<std::string, Dir> dirs_;
  std::map<int, std::string> by_wd_;
};

std::mutex& Hub::hub_mu() {
  static std::mutex* mu = new std::mutex;  // never destroyed, as the hub
  return *mu;
}

// Never destroyed: a reader may still run when statics go.
Hub& hub() {
  static Hub* h = new Hub;
  return *h;
}

}  // namespace

Status wake_hub_join(const std::shared_ptr<WakeSub>& sub) { return hub().join(sub); }
Status wake_hub_listen(const std::shared_ptr<WakeSub>& sub, bool on) { return hub().listen(sub, on); }
void wake_hub_leave(const std::shared_ptr<WakeSub>& sub) { hub().leave(sub); }

}  // namespace dlock::sqlite

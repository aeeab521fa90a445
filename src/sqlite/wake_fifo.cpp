#include "sqlite/wake_fifo.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "core/token.hpp"
#include "sqlite/host.hpp"

namespace dlock::sqlite {

namespace asio = boost::asio;

namespace {

constexpr int kSweepAtMost = 32;  // FIFOs looked at per open: bounded, and ahead of the crashes

// The lock file's permissions (0644 if it cannot be read): the doors take
// them, and their directory x where r, so whoever may use the file may
// wait on it.
mode_t file_mode(const std::string& db_path) {
  struct stat db {};
  return ::stat(db_path.c_str(), &db) == 0 ? (db.st_mode & 0666) : 0644;
}

Status make_dir(const std::string& dir, mode_t file) {
  const mode_t mode = file | ((file & 0444) >> 2);
  if (::mkdir(dir.c_str(), mode) == 0) {
    (void)::chmod(dir.c_str(), mode);  // past the umask, as the file's
  } else if (errno != EEXIST) {
    return {Errc::unavailable, "cannot make " + dir + ": " + std::strerror(errno)};
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return {Errc::unavailable, dir + " is not a directory"};
  return {};
}

// A FIFO opened for writing without waiting: -1 with errno ENXIO when
// nobody reads it. Anything but a FIFO is refused (not written to).
int open_for_writing(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) {
    ::close(fd);
    errno = EINVAL;
    return -1;
  }
  return fd;
}

}  // namespace

WakeFifo::WakeFifo(asio::io_context& io, const std::string& db_path, std::string client_id)
    : db_path_(db_path), dir_(dir_of(db_path)), path_(dir_ + "/" + client_id), fd_(io) {}

Status WakeFifo::open(std::function<void(std::string_view line)> line) {
  const mode_t mode = file_mode(db_path_);
  if (Status s = make_dir(dir_, mode); !s.ok()) return s;
  if (Status s = check_link_owner(dir_); !s.ok()) return s;
  // Made under a temporary name and opened before it gets its own: a FIFO
  // under a client's name always has its reader, so a sweep never takes a
  // live one for a dead one.
  const std::string tmp = dir_ + "/.new-" + detail::random_hex16();
  if (::mkfifo(tmp.c_str(), mode) != 0)
    return {Errc::unavailable, "cannot make a FIFO in " + dir_ + ": " + std::strerror(errno)};
  (void)::chmod(tmp.c_str(), mode);
  // Read-write: the client is its own writer too, so the FIFO never reads
  // as closed between releasers.
  const int fd = ::open(tmp.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 || ::rename(tmp.c_str(), path_.c_str()) != 0) {
    const int e = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    return {Errc::unavailable, "cannot open a FIFO in " + dir_ + ": " + std::strerror(e)};
  }
  fd_.assign(fd);
  line_ = std::move(line);
  sweep();
  read_more();
  return {};
}

bool WakeFifo::intact() {
  if (!fd_.is_open()) return true;
  struct stat at {
  }, mine{};
  return ::lstat(path_.c_str(), &at) == 0 && ::fstat(fd_.native_handle(), &mine) == 0 && at.st_ino == mine.st_ino &&
         at.st_dev == mine.st_dev;
}

Status WakeFifo::reopen() {
  boost::system::error_code ignored;
  fd_.close(ignored);  // the read in progress ends with an error, and stops
  partial_.clear();
  return open(std::move(line_));
}

void WakeFifo::read_more() {
  fd_.async_read_some(asio::buffer(buf_), [this](const boost::system::error_code& ec, std::size_t n) {
    if (ec || closed_) return;
    partial_.append(buf_.data(), n);
    std::size_t start = 0;
    for (std::size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1)
      if (line_) line_(std::string_view(partial_).substr(start, nl - start));
    partial_.erase(0, start);
    if (partial_.size() > PIPE_BUF) partial_.clear();  // not a line anyone sent
    if (!closed_) read_more();
  });
}

// FIFOs of clients that died without closing: nobody reads them.
void WakeFifo::sweep() {
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return;
  int looked = 0;
  const std::time_t stale = std::time(nullptr) - 60;
  while (dirent* e = ::readdir(d)) {
    const std::string path = dir_ + "/" + e->d_name;
    if (e->d_name[0] == '.') {  // ".", "..", and FIFOs being made: left by a crash after a minute
      struct stat st {};
      if (std::strncmp(e->d_name, ".new-", 5) == 0 && ::lstat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode) &&
          st.st_mtime < stale)
        ::unlink(path.c_str());
      continue;
    }
    if (path == path_) continue;
    if (++looked > kSweepAtMost) break;
    const int fd = open_for_writing(path);
    if (fd >= 0) {
      ::close(fd);
    } else if (errno == ENXIO) {
      ::unlink(path.c_str());
    }
  }
  ::closedir(d);
}

void WakeFifo::close() {
  if (closed_) return;
  closed_ = true;
  if (fd_.is_open()) {
    ::unlink(path_.c_str());
    boost::system::error_code ignored;
    fd_.close(ignored);
  }
}

WakeFifo::Sent WakeFifo::send(const std::string& db_path, const std::string& client_id, std::string_view line) {
  // The id came from the file: only a name this library makes is a path.
  if (client_id.size() != 16 || client_id.find_first_not_of("0123456789abcdef") != std::string::npos) return Sent::gone;
  const std::string path = dir_of(db_path) + "/" + client_id;
  const int fd = open_for_writing(path);
  if (fd < 0) {
    // ENXIO: its client died without removing it. Anything else (gone,
    // not a FIFO, not ours to write): the waiter cannot be woken either.
    if (errno == ENXIO) ::unlink(path.c_str());
    return Sent::gone;
  }
  std::string out(line);
  out += '\n';
  // EAGAIN: 64 KiB unread, its client is stopped; the turn's reservation
  // ends and the next waiter, standing by, takes over.
  (void)!::write(fd, out.data(), out.size());
  ::close(fd);
  return Sent::delivered;
}

}  // namespace dlock::sqlite

// Line-by-line talk over a loopback TCP socket, for strategies whose lock is
// taken by another process (the CLI's CMD, a peer library's helper).
#ifndef DLOCK_TORTURE_LINE_SOCKET_HPP_
#define DLOCK_TORTURE_LINE_SOCKET_HPP_

#include <cstdint>
#include <string>

namespace torture {

// One line from `fd` (without its '\n'), `buf` keeping what came after it;
// false at EOF or error.
bool read_line(int fd, std::string& buf, std::string& line);
// The same, waiting at most `timeout_ms` for it (false on timeout too).
bool read_line_within(int fd, std::string& buf, std::string& line, std::int64_t timeout_ms);
bool write_all(int fd, const std::string& s);
// A socket listening on 127.0.0.1, any free port (set in `port`); throws
// std::runtime_error naming `who` if it cannot.
int listen_loopback(std::uint16_t& port, const std::string& who);

}  // namespace torture

#endif  // DLOCK_TORTURE_LINE_SOCKET_HPP_

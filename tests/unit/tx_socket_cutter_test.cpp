// The socket cutter shuts down the socket it was armed with at its
// deadline, and only that one: not a socket that reuses the number after
// the first was closed by its owner (as libpq does on some errors).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tx/socket_cutter.hpp"

namespace dlock::tx::detail {
namespace {

using namespace std::chrono_literals;

// True when a read on `fd` sees the end of the stream (its peer was shut
// down or closed) within `within`.
bool sees_end(int fd, std::chrono::milliseconds within) {
  timeval tv{0, static_cast<suseconds_t>(within.count() * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  return ::read(fd, &c, 1) == 0;
}

TEST(SocketCutter, CutsItsSocketAtTheDeadline) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  SocketCutter cutter;
  const auto ticket = cutter.arm(pair[0], SocketCutter::Clock::now() + 50ms);
  EXPECT_TRUE(sees_end(pair[1], 5000ms));
  EXPECT_TRUE(cutter.disarm(ticket));
  ::close(pair[0]);
  ::close(pair[1]);
}

TEST(SocketCutter, ADisarmedSocketIsLeftAlone) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  SocketCutter cutter;
  EXPECT_FALSE(cutter.disarm(cutter.arm(pair[0], SocketCutter::Clock::now() + 50ms)));
  EXPECT_FALSE(sees_end(pair[1], 200ms));
  ::close(pair[0]);
  ::close(pair[1]);
}

TEST(SocketCutter, ANumberReusedAfterItsOwnerClosedItIsNotCut) {
  int first[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, first), 0);
  SocketCutter cutter;
  const int armed = first[0];
  const auto ticket = cutter.arm(armed, SocketCutter::Clock::now() + 100ms);
  ::close(armed);  // the owner gives the number back while armed
  int second[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, second), 0);
  ASSERT_EQ(second[0], armed) << "the number was not reused: the test proves nothing";
  EXPECT_TRUE(sees_end(first[1], 5000ms));
  EXPECT_TRUE(cutter.disarm(ticket)) << "the armed socket was cut";
  // The socket that now has the number still works.
  ASSERT_EQ(::write(second[1], "x", 1), 1);
  char c = 0;
  EXPECT_EQ(::read(second[0], &c, 1), 1) << "the socket that reused the number was cut";
  ::close(first[1]);
  ::close(second[0]);
  ::close(second[1]);
}

}  // namespace
}  // namespace dlock::tx::detail

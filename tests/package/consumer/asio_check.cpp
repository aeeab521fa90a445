// The consumer's use of <dlock/asio.hpp> (Boost.Asio completion tokens): a
// lock acquired and released by handlers run on an io_context.
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>
#include <string>
#include <utility>

void check_asio(const dlock::Client& client, void (*check)(bool, const std::string&)) {
  boost::asio::io_context io;
  bool released = false;
  std::uint64_t fence = 0;
  dlock::async_acquire(client, "consumer-asio", std::chrono::milliseconds(0), {},
                       boost::asio::bind_executor(io, [&](boost::system::error_code ec, dlock::Lease lease) {
                         check(!ec, "async_acquire: " + ec.message());
                         if (ec) return;
                         fence = lease.fence();
                         dlock::async_release(client, std::move(lease),
                                              boost::asio::bind_executor(io, [&](boost::system::error_code rc) {
                                                check(!rc, "async_release: " + rc.message());
                                                released = true;
                                              }));
                       }));
  io.run();
  check(fence > 0, "an asynchronous SQLite grant has a fence > 0");
  check(released, "the asynchronous release completed");
}

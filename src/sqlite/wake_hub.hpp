// The process's one inotify instance, shared by its SQLite clients: a
// thread of its own reads it and posts each event to the clients that
// asked for it, on their own I/O threads. A forked child gets a new one at
// its first use (the parent's reading thread is not in it).
#ifndef DLOCK_SQLITE_WAKE_HUB_HPP_
#define DLOCK_SQLITE_WAKE_HUB_HPP_

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>

#include "dlock/error.hpp"

namespace dlock::sqlite {

// One client's interest in a directory: its wake file and database file.
struct WakeSub {
  boost::asio::io_context* io = nullptr;
  std::string dir, wake_name, db_name;
  std::function<void()> rung, moved;  // run on io, unless closed
  std::atomic<bool> closed{false};    // set on io's thread before it leaves
  bool listening = false;             // the hub's (under its lock)
};

// Joins `sub` to the process's instance, watching its directory; an error
// (no instance can be had: the per-user limit) leaves it out.
Status wake_hub_join(const std::shared_ptr<WakeSub>& sub);
// Whether writes to its wake file are told (others' may still be).
Status wake_hub_listen(const std::shared_ptr<WakeSub>& sub, bool on);
void wake_hub_leave(const std::shared_ptr<WakeSub>& sub);

}  // namespace dlock::sqlite

#endif  // DLOCK_SQLITE_WAKE_HUB_HPP_

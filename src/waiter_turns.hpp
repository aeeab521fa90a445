// A client's plain waiters on backends that wake one waiter per release
// (Redis's default layout, PostgreSQL, SQLite): which of its attempts wait
// on which name, and what a turn or a stand-by addressed to one of them
// does. Each backend reads its own wire form and calls woken() or
// stand_by(); the rules are here once:
//   - a turn for an attempt still waiting wakes it (`wake`);
//   - a turn for an attempt that no longer waits is passed on (`leave`),
//     or the lock stays kept for nobody until the reservation ends;
//   - a stand-by wakes the attempt after the woken waiter's reservation,
//     in case that one never comes; it is dropped when the attempt stops
//     waiting.
// I/O thread only.
#ifndef DLOCK_WAITER_TURNS_HPP_
#define DLOCK_WAITER_TURNS_HPP_

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace dlock::detail {

class WaiterTurns {
 public:
  using Turn = std::function<void(const std::string& name, std::uint64_t attempt)>;
  WaiterTurns(boost::asio::io_context& io, Turn wake, Turn leave);
  ~WaiterTurns() { close(); }
  WaiterTurns(const WaiterTurns&) = delete;
  WaiterTurns& operator=(const WaiterTurns&) = delete;

  void add(const std::string& name, std::uint64_t attempt);
  void remove(const std::string& name, std::uint64_t attempt);
  bool waits(const std::string& name, std::uint64_t attempt) const;
  bool empty() const { return waiting_.empty(); }

  void woken(const std::string& name, std::uint64_t attempt);
  // Bounded to [1 ms, 60 s]: the number came over the wire.
  void stand_by(const std::string& name, std::uint64_t attempt, std::int64_t ms);
  // No callback runs after this.
  void close();

  // The wire form the SQLite and PostgreSQL backends share: "w<attempt>:<name>"
  // (a turn) or "s<attempt>:<ms>:<name>" (stand by). false: not one.
  struct Message {
    bool turn = false;
    std::uint64_t attempt = 0;
    std::int64_t ms = 0;
    std::string name;
  };
  static bool parse(std::string_view text, Message& out);
  static std::string turn_message(std::uint64_t attempt, std::string_view name);
  static std::string stand_by_message(std::uint64_t attempt, std::int64_t ms, std::string_view name);
  void deliver(const Message& m);

 private:
  using Key = std::pair<std::string, std::uint64_t>;
  boost::asio::io_context& io_;
  Turn wake_, leave_;
  // Each waiting attempt, with its stand-by timer once told to stand by.
  std::map<Key, std::unique_ptr<boost::asio::steady_timer>> waiting_;
  bool closed_ = false;
};

}  // namespace dlock::detail

#endif  // DLOCK_WAITER_TURNS_HPP_

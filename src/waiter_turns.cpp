#include "waiter_turns.hpp"

#include <algorithm>
#include <charconv>

namespace dlock::detail {

WaiterTurns::WaiterTurns(boost::asio::io_context& io, Turn wake, Turn leave)
    : io_(io), wake_(std::move(wake)), leave_(std::move(leave)) {}

void WaiterTurns::add(const std::string& name, std::uint64_t attempt) {
  if (!closed_) waiting_.try_emplace({name, attempt});
}

void WaiterTurns::remove(const std::string& name, std::uint64_t attempt) {
  auto it = waiting_.find({name, attempt});
  if (it == waiting_.end()) return;
  if (it->second) it->second->cancel();
  waiting_.erase(it);
}

bool WaiterTurns::waits(const std::string& name, std::uint64_t attempt) const {
  return waiting_.count({name, attempt}) != 0;
}

void WaiterTurns::woken(const std::string& name, std::uint64_t attempt) {
  if (closed_) return;
  if (!waits(name, attempt)) {
    if (leave_) leave_(name, attempt);  // its call is over: the next one's turn
    return;
  }
  if (wake_) wake_(name, attempt);
}

void WaiterTurns::stand_by(const std::string& name, std::uint64_t attempt, std::int64_t ms) {
  auto it = waiting_.find({name, attempt});
  if (closed_ || it == waiting_.end()) return;
  auto& timer = it->second;
  if (!timer) timer = std::make_unique<boost::asio::steady_timer>(io_);
  timer->expires_after(std::chrono::milliseconds(std::clamp<std::int64_t>(ms, 1, 60000)));
  // The key, not the iterator: the entry may go before the timer fires
  // (remove() cancels it then).
  timer->async_wait([this, name, attempt](const boost::system::error_code& ec) {
    if (ec || closed_) return;
    if (auto w = waiting_.find({name, attempt}); w != waiting_.end()) w->second.reset();
    if (wake_) wake_(name, attempt);
  });
}

void WaiterTurns::close() {
  if (closed_) return;
  closed_ = true;
  for (auto& [key, timer] : waiting_)
    if (timer) timer->cancel();
}

bool WaiterTurns::parse(std::string_view text, Message& out) {
  if (text.size() < 4 || (text[0] != 'w' && text[0] != 's')) return false;
  out.turn = text[0] == 'w';
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data() + 1, end, out.attempt);
  if (ec != std::errc() || p == end || *p != ':') return false;
  out.ms = 0;
  if (!out.turn) {
    auto [q, ec2] = std::from_chars(p + 1, end, out.ms);
    if (ec2 != std::errc() || q == end || *q != ':') return false;
    p = q;
  }
  out.name.assign(p + 1, end);
  return !out.name.empty();
}

std::string WaiterTurns::turn_message(std::uint64_t attempt, std::string_view name) {
  std::string out = "w" + std::to_string(attempt) + ':';
  out.append(name);
  return out;
}

std::string WaiterTurns::stand_by_message(std::uint64_t attempt, std::int64_t ms, std::string_view name) {
  std::string out = "s" + std::to_string(attempt) + ':' + std::to_string(ms) + ':';
  out.append(name);
  return out;
}

void WaiterTurns::deliver(const Message& m) {
  if (m.turn)
    woken(m.name, m.attempt);
  else
    stand_by(m.name, m.attempt, m.ms);
}

}  // namespace dlock::detail

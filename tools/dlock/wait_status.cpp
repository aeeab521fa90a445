#include "wait_status.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>

#include "messages.hpp"

namespace dlock::cli {
namespace {

// Not a terminal: one line, once the wait has lasted this long.
constexpr std::chrono::milliseconds kReportAfter{2000};
// ... or, if the server does not answer the look at its holder, this later.
constexpr std::chrono::milliseconds kSilentAfter{3000};

std::string seconds(std::chrono::milliseconds d) {
  std::ostringstream out;
  out.precision(d.count() < 10'000 ? 2 : 3);
  out << static_cast<double>(d.count()) / 1000.0 << " s";
  return out.str();
}

}  // namespace

std::string holder_text(const dlock::LockInfo& info) {
  std::string out = info.holder.empty() ? std::string("an unnamed holder") : shown_holder(info.holder);
  if (info.held_for) out += " for " + seconds(*info.held_for);
  return out;
}

std::string wait_status_text(const std::string& what, const std::optional<dlock::LockInfo>& info,
                             const std::string& error, std::chrono::milliseconds waited) {
  std::string out = "waiting for " + what;
  if (!error.empty())
    out += " (the server does not answer, retrying: " + error + ")";
  else if (info && info->held)
    out += " (held by " + holder_text(*info) + ", fence " + std::to_string(info->fence) + ")";
  out += "; waited " + seconds(waited);
  return out;
}

WaitStatus::WaitStatus(const dlock::Client& client, std::string name, std::string what, bool terminal, bool quiet)
    : client_(client), name_(std::move(name)), what_(std::move(what)), terminal_(terminal), quiet_(quiet) {}

WaitStatus::~WaitStatus() { finish(); }

void WaitStatus::tick() {
  if (quiet_ || finished_) return;
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_);
  if (!terminal_ && (reported_ || waited < kReportAfter)) return;
  // One inspect at a time, off this thread: a server that does not answer
  // must not hold up the wait (or a signal).
  if (!looking_.valid()) looking_ = std::async(std::launch::async, [this] { return client_.inspect(name_); });
  // The one line is written once: worth a moment's wait for its answer.
  const auto patience = terminal_ ? std::chrono::milliseconds(0) : std::chrono::milliseconds(500);
  bool answered = false;
  if (looking_.wait_for(patience) == std::future_status::ready) {
    answered = true;
    auto r = looking_.get();
    if (r.ok()) {
      info_ = *r;
      error_.clear();
    } else {
      error_ = tidy(r.status().to_string(), name_);
    }
  }
  if (!terminal_) {
    // Written with the answer; a server silent for long is news itself.
    if (!answered && waited < kReportAfter + kSilentAfter) return;
    if (!answered) error_ = "no answer within " + seconds(waited - kReportAfter);
    std::cerr << "dlock: " << wait_status_text(what_, info_, error_, waited) << '\n';
    reported_ = true;
    return;
  }
  show(wait_status_text(what_, info_, error_, waited));
}

void WaitStatus::show(const std::string& text) {
  // Carriage return and erase-line: the line is rewritten in place, so it
  // must not wrap.
  std::string line = "dlock: " + text;
  winsize ws{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && line.size() >= ws.ws_col)
    line.resize(ws.ws_col - 1u);
  std::cerr << "\r\033[K" << line << std::flush;
  shown_ = true;
}

void WaitStatus::finish() {
  if (finished_) return;
  finished_ = true;
  if (shown_) std::cerr << "\r\033[K" << std::flush;
  if (looking_.valid()) looking_.wait();
}

}  // namespace dlock::cli

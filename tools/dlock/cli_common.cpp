#include "cli_common.hpp"

#include <charconv>
#include <iostream>

#include "exit_codes.hpp"
#include "hints.hpp"
#include "messages.hpp"

namespace dlock::cli {

void say(const Common& c, const std::string& text) {
  if (c.verbose && !c.quiet) std::cerr << "dlock: " << text << '\n';
}

int fail(const dlock::Status& s, const std::string& what, const std::string& url, std::string_view name) {
  std::cerr << "dlock: " << dlock::cli::tidy(what + ": " + s.to_string(), name) << '\n';
  std::cerr << "dlock: " << dlock::cli::advice(s, url) << '\n';
  return dlock::cli::exit_code_for(s.code());
}

std::atomic<bool> library_logs{false};

std::optional<dlock::Client> connect(const Common& c, int& exit_code, std::string_view name) {
  dlock::ClientOptions options;
  options.logger = [quiet = c.quiet, name = std::string(name)](dlock::LogLevel level, std::string_view msg) {
    if (quiet || !library_logs.load() || level == dlock::LogLevel::debug || level == dlock::LogLevel::info) return;
    std::cerr << "dlock: " << dlock::cli::tidy(msg, name) << '\n';
  };
  auto client = dlock::Client::try_connect(c.url, options);
  if (!client.ok()) {
    exit_code = fail(client.status(), "cannot connect to " + dlock::describe_url(c.url), c.url);
    return std::nullopt;
  }
  return std::move(client.value());
}

std::optional<milliseconds> parse_duration(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    return std::nullopt;
  }
  std::string unit = text.substr(used);
  double scale = 1000;
  if (unit == "ms")
    scale = 1;
  else if (unit.empty() || unit == "s")
    scale = 1000;
  else if (unit == "m")
    scale = 60'000;
  else if (unit == "h")
    scale = 3'600'000;
  else
    return std::nullopt;
  if (!(value >= 0) || value * scale > 1e15) return std::nullopt;
  return milliseconds(static_cast<long long>(value * scale + 0.5));
}

}  // namespace dlock::cli

#include "sqlite/url.hpp"

#include <algorithm>

#include "core/url_parts.hpp"

namespace dlock::sqlite {
namespace {

Status bad(std::string what) { return {Errc::invalid_argument, "bad SQLite URL: " + std::move(what)}; }

}  // namespace

Result<SqliteUrl> parse_sqlite_url(std::string_view url) {
  constexpr std::string_view kScheme = "sqlite://";
  if (!url.starts_with(kScheme)) return bad("expected sqlite:///absolute/path/locks.db");
  std::string_view rest = url.substr(kScheme.size());
  const auto q = rest.find('?');
  std::string_view query = q == std::string_view::npos ? std::string_view() : rest.substr(q + 1);
  rest = rest.substr(0, q);
  if (rest.empty() || rest.front() != '/')
    return bad("the path must be absolute, after an empty host: sqlite:///absolute/path/locks.db");
  SqliteUrl config;
  if (!detail::percent_decode(rest, config.path)) return bad("invalid percent-escape in the path");
  // sqlite:////tmp/x.db (SQLAlchemy's absolute form, or "sqlite:///" put
  // before an absolute path) names /tmp/x.db: a run of slashes is one, so
  // that messages and the files made beside it show the path once-slashed.
  config.path.erase(
      std::unique(config.path.begin(), config.path.end(), [](char a, char b) { return a == '/' && b == '/'; }),
      config.path.end());
  if (config.path.back() == '/') return bad("the path names a directory, not a file");
  if (config.path.find('\0') != std::string::npos) return bad("the path holds a NUL byte");
  while (!query.empty()) {
    const std::string_view kv = detail::next_param(query);
    if (kv.empty()) continue;
    const auto eq = kv.find('=');
    const std::string key(kv.substr(0, eq));
    const std::string_view value = eq == std::string_view::npos ? std::string_view() : kv.substr(eq + 1);
    if (key == "busy_timeout_ms") {
      long long ms = 0;
      if (!detail::parse_int(value, ms) || ms < 1)
        return bad("busy_timeout_ms must be a whole number of milliseconds, 1 or more (got '" + std::string(value) +
                   "')");
      config.busy = std::chrono::milliseconds(ms);
    } else {
      return bad("unknown parameter '" + key + "' (known: busy_timeout_ms)");
    }
  }
  return config;
}

}  // namespace dlock::sqlite

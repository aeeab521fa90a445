#include "messages.hpp"

#include <cctype>
#include <dlock/client.hpp>

namespace dlock::cli {
namespace {

constexpr std::size_t kShownNameBytes = 80;

bool scheme_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '+' || c == '-' || c == '.';
}

// A URL ends where an argument or a quotation would: at blanks and quotes.
bool ends_url(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0 || c == '\'' || c == '"' || c == '`'; }

}  // namespace

std::string redact_urls(std::string_view text) {
  std::string out;
  std::size_t done = 0;
  for (std::size_t sep = text.find("://"); sep != std::string_view::npos; sep = text.find("://", sep + 3)) {
    std::size_t start = sep;
    while (start > done && scheme_char(text[start - 1])) --start;
    if (start == sep) continue;  // no scheme before "://"
    std::size_t end = sep + 3;
    while (end < text.size() && !ends_url(text[end])) ++end;
    out.append(text.substr(done, start - done));
    out += describe_url(text.substr(start, end - start));
    done = end;
    sep = end - 3;  // the next search starts at `end`
  }
  out.append(text.substr(done));
  return out;
}

std::string redact_urls(std::string_view text, const std::vector<std::string>& urls) {
  std::string out(text);
  for (const std::string& url : urls) {
    if (url.empty()) continue;
    const std::string safe = describe_url(url);
    for (std::size_t at = out.find(url); at != std::string::npos; at = out.find(url, at + safe.size()))
      out.replace(at, url.size(), safe);
  }
  return redact_urls(out);
}

std::string shown_name(std::string_view name) {
  if (name.size() <= kShownNameBytes) return std::string(name);
  return std::string(name.substr(0, kShownNameBytes / 2)) + "...(" + std::to_string(name.size()) + " bytes)";
}

std::string shown_holder(std::string_view holder) {
  std::string out(holder);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return shown_name(out);
}

std::string tidy(std::string_view text, std::string_view name) {
  std::string out = redact_urls(text);
  if (name.size() <= kShownNameBytes) return out;
  const std::string shown = shown_name(name);
  for (std::size_t at = out.find(name); at != std::string::npos; at = out.find(name, at + shown.size()))
    out.replace(at, name.size(), shown);
  return out;
}

}  // namespace dlock::cli

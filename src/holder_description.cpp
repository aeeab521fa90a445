#include "holder_description.hpp"

#include <errno.h>  // program_invocation_short_name (GNU)
#include <unistd.h>

#include <algorithm>
#include <string>

#include "dlock/options.hpp"

namespace dlock::detail {
namespace {

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

// Bytes that a terminal or a log line would take for something else.
std::string printable(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

}  // namespace

std::string describe_holder(std::string_view label) {
  static const std::string host = printable(host_name());
  static const std::string program = printable(program_invocation_short_name);
  const std::string tail = "[" + std::to_string(getpid()) + "]@" + host;
  std::string head = label.empty() ? program : printable(label);
  const std::size_t room = kMaxHolderInfo > tail.size() ? kMaxHolderInfo - tail.size() : 0;
  if (head.size() > room) head.resize(room);
  std::string out = head + tail;
  if (out.size() > kMaxHolderInfo) out.resize(kMaxHolderInfo);
  return out;
}

std::string node_data(std::string_view owner, std::string_view info) {
  std::string out(owner);
  if (!info.empty()) {
    out += '\0';
    out += info;
  }
  return out;
}

NodeData parse_node_data(std::string_view data) {
  const auto nul = data.find('\0');
  if (nul == std::string_view::npos) return {std::string(data), ""};
  return {std::string(data.substr(0, nul)), std::string(data.substr(nul + 1))};
}

}  // namespace dlock::detail

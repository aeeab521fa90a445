#include "core/queue_line.hpp"

#include <algorithm>

#include "core/url_parts.hpp"

namespace dlock::detail {

std::string kind_word(LockMode mode, unsigned permits) {
  if (mode == LockMode::exclusive) return "lock";
  return permits == 0 ? "read" : "sem" + std::to_string(permits);
}

void read_kind_word(std::string_view word, QueueNode& n) {
  if (word == "read") {
    n.mode = LockMode::shared;
  } else if (word.starts_with("sem")) {
    std::int64_t permits = 0;
    if (parse_int(word.substr(3), permits) && permits > 0 && permits <= 0xFFFFFFFFLL) {
      n.mode = LockMode::shared;
      n.permits = static_cast<unsigned>(permits);
    }
  }
}

namespace {

// Whether line[i] may hold, given that every node ahead of it does.
bool compatible_at(const std::vector<QueueNode>& line, std::size_t i, bool writer_ahead) {
  const QueueNode& n = line[i];
  if (n.mode == LockMode::exclusive) return i == 0;
  return !writer_ahead && (n.permits == 0 || i < n.permits);
}

}  // namespace

std::size_t granted_count(const std::vector<QueueNode>& line) {
  bool writer_ahead = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (!compatible_at(line, i, writer_ahead)) return i;
    writer_ahead = writer_ahead || line[i].mode == LockMode::exclusive;
  }
  return line.size();
}

Standing standing_of(const std::vector<QueueNode>& line, std::string_view mine) {
  Standing st;
  const auto it = std::find_if(line.begin(), line.end(), [&](const QueueNode& n) { return n.name == mine; });
  if (it == line.end()) return st;
  st.present = true;
  const std::size_t i = static_cast<std::size_t>(it - line.begin());
  st.ahead = i;
  const QueueNode& me = *it;
  std::optional<std::size_t> last_writer;
  for (std::size_t j = 0; j < i; ++j) {
    if (line[j].mode == LockMode::exclusive)
      last_writer = j;
    else if (me.mode == LockMode::shared && line[j].permits != me.permits && !st.disagrees)
      st.disagrees = line[j].permits;
  }
  st.granted = granted_count(line) > i;
  if (st.granted) return st;
  // i >= 1 here: the head of a line always holds.
  if (me.mode == LockMode::exclusive) {
    st.watch.push_back(line[i - 1].name);
  } else if (last_writer) {
    st.watch.push_back(line[*last_writer].name);
  } else if (me.permits == 0 || i < me.permits) {
    st.watch.push_back(line[i - 1].name);  // kept out by a disagreeing node ahead: it fails anyway
  } else if (me.permits > kMaxPermitWatches) {
    st.watch_children = true;
  } else {
    // It is let in once i - permits + 1 of the i nodes ahead have gone,
    // and any `permits` of those i include at least one of the gone.
    for (std::size_t j = i - me.permits; j < i; ++j) st.watch.push_back(line[j].name);
  }
  return st;
}

Status disagreeing(const std::string& name, unsigned mine, unsigned theirs) {
  const auto says = [](unsigned p) { return p == 0 ? std::string("0 (a read lock)") : std::to_string(p); };
  return {Errc::invalid_argument, "permits: this call asks for " + says(mine) + " on lock '" + name +
                                      "', whose holders and waiters use " + says(theirs)};
}

Status upgrade_refused(const AcquireCall& call) {
  const bool shared = call.mode == LockMode::shared;
  return {Errc::precondition_failed, "lock '" + call.name + "': owner '" + call.owner + "' holds it " +
                                         (shared ? "exclusively" : "shared") + " and asks for it " +
                                         (shared ? "shared" : "exclusively") +
                                         "; that would wait for its own hold (release it first)"};
}

}  // namespace dlock::detail

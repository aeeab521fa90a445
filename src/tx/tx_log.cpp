#include "tx/tx_log.hpp"

#include "dlock/client.hpp"

namespace dlock::tx::detail {

Result<std::vector<TxInfo>> TxLog::unfinished(std::size_t limit) {
  auto gids = unfinished_gids(limit);
  if (!gids.ok()) return gids.status();
  std::vector<TxInfo> out;
  for (const auto& gid : *gids) {
    auto info = load(gid);
    if (!info.ok()) {
      if (info.code() == Errc::not_held) continue;  // gone meanwhile
      return info.status();
    }
    if (!finished(info->state)) out.push_back(std::move(*info));  // not finished meanwhile
  }
  return out;
}

std::string_view state_column(State s) { return to_string(s); }

bool parse_state(std::string_view text, State& out) {
  for (State s : {State::trying, State::committing, State::aborting, State::committed, State::aborted})
    if (text == to_string(s)) {
      out = s;
      return true;
    }
  return false;
}

std::string new_log_id() { return Client::random_owner().substr(0, 12); }

}  // namespace dlock::tx::detail

#include "tx_command.hpp"

#include <dlock/tx.hpp>
#include <nlohmann/json.hpp>

#include "exit_codes.hpp"

namespace dlock::cli {
namespace {

nlohmann::json to_json(const dlock::tx::TxInfo& t) {
  nlohmann::json branches = nlohmann::json::array();
  for (const auto& b : t.branches)
    branches.push_back(
        {{"participant", b.participant}, {"done", b.done}, {"attempts", b.attempts}, {"last_error", b.last_error}});
  return {{"gid", t.gid},
          {"state", std::string(dlock::tx::to_string(t.state))},
          {"reason", t.reason},
          {"created_ms", t.created_ms},
          {"updated_ms", t.updated_ms},
          {"branches", branches}};
}

// A participant's answer in a branch's last error may hold bytes that are
// not UTF-8: printed as U+FFFD, as `dlock list` does, not an error.
std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

void print(const dlock::tx::TxInfo& t, std::ostream& out) {
  out << t.gid << ": " << dlock::tx::to_string(t.state);
  if (!t.reason.empty()) out << " (" << t.reason << ")";
  out << '\n';
  for (std::size_t i = 0; i < t.branches.size(); ++i) {
    const auto& b = t.branches[i];
    out << "  branch " << i << " " << b.participant << ": " << (b.done ? "done" : "not done");
    if (b.attempts > 0) out << ", " << b.attempts << " failed attempt" << (b.attempts == 1 ? "" : "s");
    if (!b.last_error.empty()) out << ", last error: " << b.last_error;
    out << '\n';
  }
}

int failed(const dlock::Status& s, const std::string& what, std::ostream& err) {
  err << "dlock: " << what << ": " << s.to_string() << '\n';
  return exit_code_for(s.code());
}

}  // namespace

int run_tx_command(const TxCommand& c, std::ostream& out, std::ostream& err) {
  // Every action reads or marks a log that must be there already: a
  // mistyped URL must not leave a new, empty log behind.
  dlock::tx::CoordinatorOptions options;
  options.create_if_missing = false;
  auto coordinator = dlock::tx::Coordinator::open(c.url, options);
  if (!coordinator.ok()) {
    const dlock::Status& s = coordinator.status();
    if (s.code() == Errc::invalid_argument && s.message().starts_with("no transaction log at ")) {
      err << "dlock: " << s.message() << '\n';
      return kNoInput;
    }
    return failed(s, "cannot open the transaction log", err);
  }
  if (c.action == "list") {
    auto list = coordinator->list_unfinished(1000);
    if (!list.ok()) return failed(list.status(), "cannot list transactions", err);
    if (c.json) {
      nlohmann::json all = nlohmann::json::array();
      for (const auto& t : *list) all.push_back(to_json(t));
      out << dump(all) << '\n';
    } else {
      for (const auto& t : *list) print(t, out);
    }
    return 0;
  }
  if (c.gid.empty()) {
    err << "dlock: tx " << c.action << " needs a transaction id\n";
    return kUsage;
  }
  if (c.action == "show") {
    auto t = coordinator->show(c.gid);
    if (!t.ok()) return failed(t.status(), "cannot show '" + c.gid + "'", err);
    if (c.json)
      out << dump(to_json(*t)) << '\n';
    else
      print(*t, out);
    return 0;
  }
  if (c.action == "retry") {
    if (dlock::Status s = coordinator->retry_now(c.gid); !s.ok())
      return failed(s, "cannot make '" + c.gid + "' due", err);
    return 0;
  }
  err << "dlock: tx takes list, show or retry, not '" << c.action << "'\n";
  return kUsage;
}

}  // namespace dlock::cli

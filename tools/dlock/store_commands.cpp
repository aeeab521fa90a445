#include "store_commands.hpp"

#include <sys/stat.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "exit_codes.hpp"
#include "hints.hpp"
#include "messages.hpp"
#include "wait_status.hpp"

namespace dlock::cli {
namespace {

// A SQLite URL whose file does not exist: nothing can be held there, and
// connecting would create it (a read should not write).
bool sqlite_store_missing(const std::string& url) {
  if (dlock::cli::store_of(url) != dlock::cli::Store::sqlite) return false;
  const std::string path = url.substr(std::string_view("sqlite://").size(), url.find('?') - 9);
  struct stat st {};
  // Only a well-formed URL (absolute path): the library reports bad ones.
  return path.starts_with('/') && stat(path.c_str(), &st) != 0 && errno == ENOENT;
}

nlohmann::json as_json(const std::string& name, const dlock::LockInfo& info) {
  return {{"name", name},
          {"held", info.held},
          {"fence", info.fence},
          {"last_fence", info.last_fence},
          {"remaining_ms", info.remaining.count()},
          {"reentry_count", info.reentry_count},
          {"waiters", info.waiters ? nlohmann::json(*info.waiters) : nlohmann::json()},
          {"holder", info.holder},
          {"held_for_ms", info.held_for ? nlohmann::json(info.held_for->count()) : nlohmann::json()},
          {"holders", info.holders},
          {"shared", info.shared}};
}

// "NAME: held by H for 12 s, fence 2, lease 28.5 s left": a held lock, for
// status and list. Shared and counted locks: how many hold it, and the
// oldest grant speaks for them.
// True for the stores whose locks are kept by a session, not a lease
// (ZooKeeper, etcd): a hold without a TTL is normal there.
bool session_store(const std::string& url) {
  const auto store = dlock::cli::store_of(url);
  return store == dlock::cli::Store::zookeeper || store == dlock::cli::Store::etcd;
}

std::string held_text(const std::string& name, const dlock::LockInfo& info, const std::string& url) {
  std::ostringstream out;
  out << shown_name(name) << ": held";
  if (info.shared)
    out << " shared by " << info.holders << (info.holder.empty() ? "" : ", the first");
  else if (info.holders > 1)
    out << " by " << info.holders << (info.holder.empty() ? "" : ", the first");
  if (!info.holder.empty() || info.held_for) out << " by " << dlock::cli::holder_text(info);
  out << ", fence " << info.fence << ", ";
  if (info.remaining.count() > 0)
    out << "lease " << static_cast<double>(info.remaining.count()) / 1000.0 << " s left";
  else
    out << (session_store(url) ? "kept by its holder's session"
                               : "no expiry (kept until deleted: a peer's key without a TTL?)");
  return out.str();
}

void print_status(const Common& common, const std::string& name, const dlock::Result<dlock::LockInfo>& info,
                  bool no_store) {
  const std::string waiters =
      info->waiters ? std::to_string(*info->waiters) + " waiting" : std::string("waiters unknown");
  if (common.json) {
    // Names and holder texts are bytes: anything not UTF-8 is replaced.
    std::cout << as_json(name, *info).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  } else if (info->held) {
    std::cout << held_text(name, *info, common.url) << ", re-entry count " << info->reentry_count << ", " << waiters
              << '\n';
  } else if (no_store) {
    std::cout << shown_name(name) << ": free (no lock file at " << dlock::describe_url(common.url) << " yet)\n";
  } else {
    std::cout << shown_name(name) << ": free (fence counter at " << info->last_fence << "), " << waiters << '\n';
  }
}

}  // namespace

int cmd_migrate(const Common& common) {
  int code = 0;
  auto client = connect(common, code);
  if (!client) return code;
  if (!common.quiet) std::cout << "the lock table at " << dlock::describe_url(common.url) << " is ready\n";
  return 0;
}

int cmd_list(const Common& common, const std::string& prefix) {
  if (sqlite_store_missing(common.url)) {
    std::cout << (common.json ? "[]\n" : "");
    return 0;
  }
  int code = 0;
  auto client = connect(common, code);
  if (!client) return code;
  auto locks = client->list(prefix);
  if (!locks.ok()) return fail(locks.status(), "cannot list the locks", common.url);
  if (common.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& l : *locks) all.push_back(as_json(l.name, l.info));
    std::cout << all.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    return 0;
  }
  for (const auto& l : *locks)
    std::cout << held_text(l.name, l.info, common.url)
              << (l.info.waiters ? ", " + std::to_string(*l.info.waiters) + " waiting" : std::string()) << '\n';
  return 0;
}

int cmd_status(const Common& common, const std::vector<std::string>& names, bool prometheus) {
  // `dlock status NAME URL`: a URL among the names is a mistake, and would
  // be printed back, password and all.
  for (const std::string& name : names)
    if (name.find("://") != std::string::npos) {
      std::cerr << "dlock: '" << dlock::cli::redact_urls(name, {name})
                << "' looks like a URL, not a lock name: give it as --url URL (see dlock status --help)\n";
      return dlock::cli::kUsage;
    }
  std::vector<dlock::InspectedLock> seen;
  std::optional<dlock::Client> client;
  const bool no_store = sqlite_store_missing(common.url);
  for (const std::string& name : names) {
    dlock::Result<dlock::LockInfo> info = dlock::LockInfo{};
    if (!no_store) {
      int code = 0;
      if (!client) client = connect(common, code, name);
      if (!client) return code;
      info = client->inspect(name);
      if (!info.ok()) return fail(info.status(), "cannot read the state of '" + name + "'", common.url, name);
    }
    if (prometheus)
      seen.push_back({name, *info});
    else
      print_status(common, name, *info, no_store);
  }
  if (prometheus) {
    try {
      std::cout << dlock::locks_to_prometheus(seen);
    } catch (const dlock::Error& e) {  // a name given twice
      std::cerr << "dlock: " << dlock::cli::tidy(e.status().to_string()) << '\n';
      return dlock::cli::kUsage;
    }
  }
  return 0;
}

}  // namespace dlock::cli

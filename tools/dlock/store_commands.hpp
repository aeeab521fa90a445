// dlock status, list and migrate: what a store holds, read (migrate
// makes a SQL store's lock table).
#ifndef DLOCK_TOOLS_DLOCK_STORE_COMMANDS_HPP_
#define DLOCK_TOOLS_DLOCK_STORE_COMMANDS_HPP_

#include <string>
#include <vector>

#include "cli_common.hpp"

namespace dlock::cli {

// Connecting to a SQL store makes the lock table if it is missing and
// checks its version: that is the whole migration.
int cmd_migrate(const Common& common);
// The locks held now whose names start with `prefix`.
int cmd_list(const Common& common, const std::string& prefix);
// Each name's state, as text, JSON (common.json) or Prometheus gauges.
int cmd_status(const Common& common, const std::vector<std::string>& names, bool prometheus);

}  // namespace dlock::cli

#endif  // DLOCK_TOOLS_DLOCK_STORE_COMMANDS_HPP_

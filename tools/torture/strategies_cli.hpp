// The CLI as a strategy: each grant is one `dlock run NAME -- CMD` process
// on the SQLite lock file, whose CMD (this binary's `cli-cmd`) does the
// critical section's register writes on the worker's orders, so that what
// stops or outlives CMD is what the registers see.
#ifndef DLOCK_TORTURE_STRATEGIES_CLI_HPP_
#define DLOCK_TORTURE_STRATEGIES_CLI_HPP_

#include <cstdint>
#include <memory>

#include "strategies.hpp"

namespace torture {

std::unique_ptr<Strategy> make_cli_run(const StrategyConfig& config);

// CMD's side: connects to the worker on 127.0.0.1:`port`, sends
// "fence $DLOCK_FENCE", then serves "write FENCE" lines with the register
// writes on the resource server until the worker closes. Returns the exit
// status.
int cli_cmd_main(std::uint16_t port, std::uint16_t resource_port);

}  // namespace torture

#endif  // DLOCK_TORTURE_STRATEGIES_CLI_HPP_

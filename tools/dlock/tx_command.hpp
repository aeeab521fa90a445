// `dlock tx list|show|retry`: what a transaction log (<dlock/tx.hpp>) holds,
// for operators.
#ifndef DLOCK_TOOLS_TX_COMMAND_HPP_
#define DLOCK_TOOLS_TX_COMMAND_HPP_

#include <ostream>
#include <string>

namespace dlock::cli {

struct TxCommand {
  std::string url;     // the log's URL (sqlite:///...)
  std::string action;  // list, show or retry
  std::string gid;     // show, retry
  bool json = false;
};

// Runs it, printing to `out` (results) and `err` (errors); returns the exit
// code.
int run_tx_command(const TxCommand& command, std::ostream& out, std::ostream& err);

}  // namespace dlock::cli

#endif  // DLOCK_TOOLS_TX_COMMAND_HPP_

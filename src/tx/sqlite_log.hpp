// The transaction log in a SQLite file (tables dlock_tx, dlock_tx_branch),
// on the SQLite backend's database layer. One connection, serialized by a
// mutex: callers may be on any thread.
#ifndef DLOCK_TX_SQLITE_LOG_HPP_
#define DLOCK_TX_SQLITE_LOG_HPP_

#include <memory>
#include <string>

#include "tx/tx_log.hpp"

namespace dlock::tx::detail {

Result<std::unique_ptr<TxLog>> open_sqlite_log(const std::string& path, milliseconds busy);

}  // namespace dlock::tx::detail

#endif  // DLOCK_TX_SQLITE_LOG_HPP_

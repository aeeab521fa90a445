// The transaction log in a SQLite file (tables dlock_tx, dlock_tx_branch),
// on the SQLite backend's database layer. One connection, serialized by a
// mutex: callers may be on any thread.
#ifndef DLOCK_TX_SQLITE_LOG_HPP_
#define DLOCK_TX_SQLITE_LOG_HPP_

#include <memory>
#include <string>

#include "tx/tx_log.hpp"

namespace dlock::tx::detail {

// The log in the file at `path`. With `create_if_missing` false, only a log
// that exists (the file and its tables) is opened and nothing is created or
// changed: invalid_argument "no transaction log at PATH" otherwise.
Result<std::unique_ptr<TxLog>> open_sqlite_log(const std::string& path, milliseconds busy,
                                               bool create_if_missing = true);

}  // namespace dlock::tx::detail

#endif  // DLOCK_TX_SQLITE_LOG_HPP_

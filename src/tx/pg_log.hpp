// The transaction log in PostgreSQL (tables <schema>.dlock_tx and
// <schema>.dlock_tx_branch), on the PostgreSQL backend's blocking
// connection. Every write is one statement (one round trip, one
// transaction), committed with synchronous_commit on. Several coordinator
// processes may share one log. One connection, serialized by a mutex.
#ifndef DLOCK_TX_PG_LOG_HPP_
#define DLOCK_TX_PG_LOG_HPP_

#include <memory>
#include <string_view>

#include "tx/tx_log.hpp"

namespace dlock::tx::detail {

// `url` as for the PostgreSQL backend (postgres://...); its schema holds
// the tables. With `create_if_missing` false, only a log whose tables exist
// is opened and nothing is created: invalid_argument "no transaction log
// at ..." otherwise.
Result<std::unique_ptr<TxLog>> open_pg_log(std::string_view url, bool create_if_missing = true);

}  // namespace dlock::tx::detail

#endif  // DLOCK_TX_PG_LOG_HPP_

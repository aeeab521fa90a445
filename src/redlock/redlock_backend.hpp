// The Redlock backend: one lock over N independent Redis masters, each
// reached through its own RedisBackend (scripts, pipelining, deadlines,
// reconnects). Every call goes to all masters at once; a majority decides.
//
//   acquire  a RedlockRound from before the first send; silent nodes vote no
//            after the per-node timeout; a failed round is undone on every
//            node with the idempotent release.
//   release  the majority's answer.
//   renew    per lease, renewed only if a majority renewed.
//   fence    node 0's counter, and only when node 0 voted yes (0 otherwise):
//            independent masters cannot make a safe monotonic token.
#ifndef DLOCK_REDLOCK_REDLOCK_BACKEND_HPP_
#define DLOCK_REDLOCK_REDLOCK_BACKEND_HPP_

#include <boost/asio/io_context.hpp>
#include <memory>
#include <vector>

#include "backend.hpp"
#include "redis/connection.hpp"

namespace dlock::redlock {

// The bound on one node's answer within a round: command_timeout, capped at
// lease / 10 so a slow node cannot eat the lease, and at least 10 ms.
milliseconds per_node_timeout(milliseconds command_timeout, milliseconds lease);

// REQUIRES: nodes.size() odd and >= 3 (parse_redlock_url checks it).
std::unique_ptr<detail::Backend> make_redlock_backend(boost::asio::io_context& io,
                                                      std::vector<redis::ConnectionConfig> nodes,
                                                      std::string key_prefix, milliseconds command_timeout);

}  // namespace dlock::redlock

#endif  // DLOCK_REDLOCK_REDLOCK_BACKEND_HPP_

// Peer libraries as verifier strategies: their own code takes the lock, in a
// helper process of theirs this strategy drives (tools/torture/peers/).
#ifndef DLOCK_TORTURE_STRATEGIES_PEERS_HPP_
#define DLOCK_TORTURE_STRATEGIES_PEERS_HPP_

#include <memory>

#include "strategies.hpp"

namespace torture {

// redis-py's Lock on config.key through the lock server's proxy (the key
// layout of dlock's ?layout=plain). Its grants carry no fence: it writes the
// unfenced register only. Throws if Debian's python3 with redis-py cannot
// start it.
std::unique_ptr<Strategy> make_redispy_peer(const StrategyConfig& config);

}  // namespace torture

#endif  // DLOCK_TORTURE_STRATEGIES_PEERS_HPP_

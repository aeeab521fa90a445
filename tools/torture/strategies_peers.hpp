// Peer libraries as verifier strategies: their own code takes the lock, in a
// helper process of theirs this strategy drives (tools/torture/peers/).
#ifndef DLOCK_TORTURE_STRATEGIES_PEERS_HPP_
#define DLOCK_TORTURE_STRATEGIES_PEERS_HPP_

#include <memory>
#include <string>

#include "strategies.hpp"

namespace torture {

// redis-py's Lock on config.key through the lock server's proxy (the key
// layout of dlock's ?layout=plain). Its grants carry no fence: it writes the
// unfenced register only. Throws if Debian's python3 with redis-py cannot
// start it.
std::unique_ptr<Strategy> make_redispy_peer(const StrategyConfig& config);

// kazoo's Lock on the ZooKeeper node `path` through the members' proxies
// (the node names of dlock's ?layout=kazoo), its session timeout the lease.
// No fence either.
std::unique_ptr<Strategy> make_kazoo_peer(const StrategyConfig& config, const std::string& path);

// node-redisson's RLock (Java Redisson's scripts and keys) on config.key
// through the lock server's proxy (dlock's ?layout=redisson); no fence.
std::unique_ptr<Strategy> make_redisson_peer(const StrategyConfig& config);
// npm redlock on one instance (dlock's ?layout=plain); no fence.
std::unique_ptr<Strategy> make_redlock_peer(const StrategyConfig& config);
// Both need node and $DLOCK_PEERS_MODULES with `package` in it
// (bench/peers/package.json, installed by scripts/test).
bool node_peer_installed(const std::string& package);

}  // namespace torture

#endif  // DLOCK_TORTURE_STRATEGIES_PEERS_HPP_

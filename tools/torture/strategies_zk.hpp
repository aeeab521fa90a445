// The seed's ZooKeeper lock (seed 003) as the article gives it, on the C
// client: every acquirer creates an ephemeral-sequential node and, until
// its node is the lowest, watches the parent's children, so every release
// wakes every waiter (the herd). Correct, no fence; the verifier counts its
// wake-ups per release beside dlock's (one).
#ifndef DLOCK_TORTURE_STRATEGIES_ZK_HPP_
#define DLOCK_TORTURE_STRATEGIES_ZK_HPP_

#include <memory>

#include "strategies.hpp"

namespace torture {

std::unique_ptr<Strategy> make_zk_herd(const StrategyConfig& config);

}  // namespace torture

#endif  // DLOCK_TORTURE_STRATEGIES_ZK_HPP_

// The recipes as strategies, each driving the public class a user would:
//   fair-<backend>       dlock::Mutex with LockOptions::fair
//   rw-<backend>         dlock::SharedMutex: each acquire a read (70%) or a
//                        write (30%); readers only read, writers write
//   semaphore-<backend>  dlock::Semaphore with StrategyConfig::permits;
//                        permit holders only read (they hold at once)
//   election-<backend>   dlock::Election: a won campaign leads for 1-4
//                        rounds of fenced writes (term() as the fence),
//                        then resigns
// <backend>: redis (one server), postgres, sqlite, zk, etcd. Redlock refuses the
// recipes, so there is no redlock one.
#ifndef DLOCK_TORTURE_STRATEGIES_RECIPES_HPP_
#define DLOCK_TORTURE_STRATEGIES_RECIPES_HPP_

#include <memory>
#include <string>
#include <vector>

#include "strategies.hpp"

namespace torture {

// "fair", "rw", "semaphore", "election" for a recipe strategy's name, else "".
std::string recipe_of(const std::string& strategy);
// Every recipe strategy's name, recipe by recipe.
const std::vector<std::string>& recipe_strategy_names();
// REQUIRES: recipe_of(name) is not empty.
std::unique_ptr<Strategy> make_recipe(const std::string& name, LockServer server, const StrategyConfig& config);

}  // namespace torture

#endif  // DLOCK_TORTURE_STRATEGIES_RECIPES_HPP_

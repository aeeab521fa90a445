// What a zk:// URL names: the ensemble, where the locks live, the session.
#ifndef DLOCK_ZOOKEEPER_CONFIG_HPP_
#define DLOCK_ZOOKEEPER_CONFIG_HPP_

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "dlock/options.hpp"

namespace dlock::zookeeper {

// Whose names the queue's nodes take (lock_queue.hpp). Both are read in
// every layout; this picks the names dlock makes, so that the peer library
// of a fleet sorts them where they stand.
enum class Naming {
  curator,  // "_c_<guid>-lock-<seq>": Curator's InterProcessMutex (the default)
  kazoo,    // "_c_<guid>__lock__<seq>": kazoo's Lock, WriteLock and ReadLock
};

struct ZkConfig {
  std::string hosts;                                 // "h1:2181,h2:2181": the C client's connect string
  std::string base;                                  // "/chroot/dlock": every lock is a child of it
  std::chrono::milliseconds session_timeout{10000};  // asked for; the server may clamp it
  std::string user, password;                        // digest auth; empty: none
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds command_timeout{2000};  // a blocking release waits this long for its reply
  Naming naming = Naming::curator;                  // ?layout=kazoo: kazoo's
  std::string describe;                             // the URL without its password, for messages
  std::function<void(LogLevel, std::string_view)> log;
};

}  // namespace dlock::zookeeper

#endif  // DLOCK_ZOOKEEPER_CONFIG_HPP_

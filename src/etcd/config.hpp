// What an etcd:// URL names: the cluster, where the locks live, the lease.
#ifndef DLOCK_ETCD_CONFIG_HPP_
#define DLOCK_ETCD_CONFIG_HPP_

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "dlock/options.hpp"
#include "etcd/etcd_rpc.hpp"

namespace dlock::etcd {

struct EtcdBackendConfig {
  EtcdConfig cluster;  // the members, and the user to authenticate as
  // Put before every lock name: lock NAME's line is the keys under
  // `prefix` + NAME + "/". Empty (the default): etcdctl lock NAME's keys.
  std::string prefix;
  // The lease that keeps this client's keys (asked for; the server raises
  // one below its minimum).
  std::chrono::seconds session_ttl{10};
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds command_timeout{2000};
  std::string describe;  // the URL without its password, for messages
  std::function<void(LogLevel, std::string_view)> log;
};

}  // namespace dlock::etcd

#endif  // DLOCK_ETCD_CONFIG_HPP_

// The ZooKeeper URL scheme for the backend registry:
//   zk://[user:password@]host[:port][,host[:port]...][/chroot][?param=value&...]
// Parameters: session_timeout (a duration: 10s, 1500ms; default 10s; the
// server clamps it to its own 2-20 ticks), prefix (the node under the chroot
// holding every lock, default "dlock"). user:password: digest auth, and the
// nodes this client creates are then readable and writable by that identity
// only. TLS: Debian's C client (3.8) is built without it, so zk+tls:// and
// a `tls` parameter are refused.
#ifndef DLOCK_ZOOKEEPER_FACTORY_HPP_
#define DLOCK_ZOOKEEPER_FACTORY_HPP_

#include "backend_registry.hpp"
#include "zookeeper/config.hpp"

namespace dlock::zookeeper {

// invalid_argument naming the bad part.
Result<ZkConfig> parse_zk_url(std::string_view url);

Result<std::unique_ptr<detail::Backend>> make_from_url(std::string_view url, detail::BackendContext& context);

}  // namespace dlock::zookeeper

#endif  // DLOCK_ZOOKEEPER_FACTORY_HPP_

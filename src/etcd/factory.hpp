// The etcd URL scheme for the backend registry:
//   etcd[+tls]://[user:password@]host[:port][,host[:port]...][/PREFIX][?param=value&...]
// Ports default to 2379. PREFIX is put before every lock name as it is
// (with a '/' added if it does not end in one): lock NAME's keys are
// PREFIX/NAME/<lease in hex>. Without one they are NAME/<lease in hex>,
// the keys `etcdctl lock NAME` and Go's concurrency.Mutex use, so the two
// exclude each other. Parameters: session_timeout (the lease's TTL, a
// duration with a unit, whole seconds, default 10s); with etcd+tls://,
// cacert (the CA to verify the members' certificates by; default: the
// system's roots), cert and key (a client certificate, where the cluster
// asks for one). user:password: etcd's password authentication
// (ClientOptions' username and password win).
#ifndef DLOCK_ETCD_FACTORY_HPP_
#define DLOCK_ETCD_FACTORY_HPP_

#include "backend_registry.hpp"
#include "etcd/config.hpp"

namespace dlock::etcd {

// invalid_argument naming the bad part.
Result<EtcdBackendConfig> parse_etcd_url(std::string_view url);

Result<std::unique_ptr<detail::Backend>> make_from_url(std::string_view url, detail::BackendContext& context);

}  // namespace dlock::etcd

#endif  // DLOCK_ETCD_FACTORY_HPP_

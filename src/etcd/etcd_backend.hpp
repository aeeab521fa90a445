// The etcd backend: etcd's own lock (clientv3/concurrency.Mutex, etcdctl
// lock) behind the Backend interface. Internal.
#ifndef DLOCK_ETCD_ETCD_BACKEND_HPP_
#define DLOCK_ETCD_ETCD_BACKEND_HPP_

#include <boost/asio/io_context.hpp>
#include <memory>

#include "backend.hpp"
#include "etcd/config.hpp"

namespace dlock::etcd {

std::unique_ptr<detail::Backend> make_etcd_backend(boost::asio::io_context& io, EtcdBackendConfig config);

}  // namespace dlock::etcd

#endif  // DLOCK_ETCD_ETCD_BACKEND_HPP_

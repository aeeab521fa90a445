// The ZooKeeper backend: the seed's ephemeral-sequential lock queue, done
// as Curator does it and where Curator falls short (see zk_backend.cpp).
#ifndef DLOCK_ZOOKEEPER_ZK_BACKEND_HPP_
#define DLOCK_ZOOKEEPER_ZK_BACKEND_HPP_

#include <boost/asio/io_context.hpp>
#include <memory>

#include "backend.hpp"
#include "zookeeper/config.hpp"

namespace dlock::zookeeper {

std::unique_ptr<detail::Backend> make_zk_backend(boost::asio::io_context& io, ZkConfig config);

}  // namespace dlock::zookeeper

#endif  // DLOCK_ZOOKEEPER_ZK_BACKEND_HPP_

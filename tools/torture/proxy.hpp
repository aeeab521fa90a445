// The verifier's name for tools/common's TCP proxy (common/tcp_proxy.hpp).
#ifndef DLOCK_TORTURE_PROXY_HPP_
#define DLOCK_TORTURE_PROXY_HPP_

#include "common/tcp_proxy.hpp"

namespace torture {

using dlock::tools::Proxy;
using dlock::tools::ProxyGroup;

}  // namespace torture

#endif  // DLOCK_TORTURE_PROXY_HPP_

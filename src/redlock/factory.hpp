// redlock:// and redlock+tls:// (a majority of independent Redis masters)
// for the backend registry.
#ifndef DLOCK_REDLOCK_FACTORY_HPP_
#define DLOCK_REDLOCK_FACTORY_HPP_

#include "backend_registry.hpp"

namespace dlock::redlock {

Result<std::unique_ptr<detail::Backend>> make_from_url(std::string_view url, detail::BackendContext& context);

}  // namespace dlock::redlock

#endif  // DLOCK_REDLOCK_FACTORY_HPP_

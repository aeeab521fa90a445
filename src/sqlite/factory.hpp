// The SQLite backend's URL scheme for the backend registry (sqlite/url.hpp).
#ifndef DLOCK_SQLITE_FACTORY_HPP_
#define DLOCK_SQLITE_FACTORY_HPP_

#include "backend_registry.hpp"
#include "sqlite/sqlite_backend.hpp"

namespace dlock::sqlite {

Result<std::unique_ptr<detail::Backend>> make_from_url(std::string_view url, detail::BackendContext& context);

}  // namespace dlock::sqlite

#endif  // DLOCK_SQLITE_FACTORY_HPP_

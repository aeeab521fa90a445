// The PostgreSQL URL schemes for the backend registry (postgres/url.hpp).
#ifndef DLOCK_POSTGRES_FACTORY_HPP_
#define DLOCK_POSTGRES_FACTORY_HPP_

#include "backend_registry.hpp"
#include "postgres/pg_backend.hpp"

namespace dlock::postgres {

Result<std::unique_ptr<detail::Backend>> make_from_url(std::string_view url, detail::BackendContext& context);

}  // namespace dlock::postgres

#endif  // DLOCK_POSTGRES_FACTORY_HPP_

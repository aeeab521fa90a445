#include "redlock/factory.hpp"

#include "redis/factory.hpp"
#include "redis/url.hpp"
#include "redlock/redlock_backend.hpp"

namespace dlock::redlock {

Result<std::unique_ptr<detail::Backend>> make_from_url(std::string_view url, detail::BackendContext& context) {
  const ClientOptions& o = context.options;
  if (Status s = detail::refuse_wait_replicas(o, "Redlock"); !s.ok()) return s;
  auto eps = detail::parse_redlock_url(url);
  if (!eps.ok()) return eps.status();
  auto configs = redis::configs_for(std::move(*eps), context);
  if (!configs.ok()) return configs.status();
  return make_redlock_backend(context.io, std::move(*configs), o.key_prefix, o.command_timeout);
}

}  // namespace dlock::redlock

#include "sqlite/factory.hpp"

#include "sqlite/url.hpp"

namespace dlock::sqlite {

Result<std::unique_ptr<detail::Backend>> make_from_url(std::string_view url, detail::BackendContext& context) {
  if (Status s = detail::refuse_wait_replicas(context.options, "SQLite"); !s.ok()) return s;
  auto target = parse_sqlite_url(url);
  if (!target.ok()) return target.status();
  SqliteConfig config;
  config.path = std::move(target->path);
  config.busy = target->busy;
  config.log = context.log;
  return make_sqlite_backend(context.io, std::move(config));
}

}  // namespace dlock::sqlite

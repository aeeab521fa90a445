#include "dlock/client.hpp"

#include <algorithm>

#include "client_core.hpp"
#include "core/token.hpp"
#include "dlock/version.hpp"
#include "sync_wait.hpp"

namespace dlock {

namespace detail {
// A blocking acquire: on the caller's thread when the owner is fresh and the
// backend allows it, else (or to wait) through the I/O thread.
Result<Lease> blocking_acquire(ClientCore& core, std::string name, milliseconds wait, const LockOptions& options,
                               bool fresh_owner, Shape shape) {
  AcquireSeed seed;
  seed.shape = shape;
  if (fresh_owner)
    if (auto r = core.acquire_now(name, wait, options, seed)) return std::move(*r);
  return acquire_and_wait(core, std::move(name), wait, options, seed);
}

Result<Lease> acquire_and_wait(ClientCore& core, std::string name, milliseconds wait, const LockOptions& options,
                               AcquireSeed seed) {
  SyncWait<Result<Lease>> result;
  core.acquire(std::move(name), wait, options, result.setter(), seed);
  return result.wait();
}
}  // namespace detail

namespace {
Status on_io_thread_error(std::string_view call) {
  return {Errc::precondition_failed, std::string(call) +
                                         " blocks, and was called on the client's I/O thread (from a callback); "
                                         "use the async_ form there"};
}
}  // namespace

Client::Client(std::shared_ptr<detail::ClientCore> core) noexcept : core_(std::move(core)) {}

Result<Client> Client::try_connect(std::string_view url, ClientOptions options) {
  auto core = detail::ClientCore::connect(url, std::move(options));
  if (!core.ok()) return core.status();
  return Client(std::move(core.value()));
}

Client Client::connect(std::string_view url, ClientOptions options) {
  return try_connect(url, std::move(options)).value();
}

Result<Lease> Client::acquire(std::string_view name, milliseconds wait, const LockOptions& options) const {
  if (core_->on_io_thread()) return on_io_thread_error("Client::acquire");
  if (!options.owner.empty()) return detail::blocking_acquire(*core_, std::string(name), wait, options, false);
  LockOptions fresh = options;  // a new owner: nothing of it is held here
  fresh.owner = random_owner();
  return detail::blocking_acquire(*core_, std::string(name), wait, fresh, true);
}

Result<Lease> Client::try_acquire(std::string_view name, const LockOptions& options) const {
  return acquire(name, milliseconds(0), options);
}

void Client::async_acquire(std::string name, milliseconds wait, LockOptions options,
                           std::function<void(Result<Lease>)> done) const {
  core_->acquire(std::move(name), wait, std::move(options), std::move(done));
}

void Client::async_release(Lease lease, std::function<void(Status)> done) const {
  if (!lease.hold_) {
    core_->deliver(std::move(done), Status(Errc::not_held, "the lease is empty (already released or moved from)"));
    return;
  }
  auto core = lease.core_.lock();
  if (!core) {
    lease.hold_.reset();
    core_->deliver(std::move(done), Status(Errc::cancelled, "the lease's client was closed, which released it"));
    return;
  }
  core->release(std::move(lease.hold_), std::move(done));
}

Result<LockInfo> Client::inspect(std::string_view name) const {
  if (core_->on_io_thread()) return on_io_thread_error("Client::inspect");
  detail::SyncWait<Result<LockInfo>> result;
  core_->inspect(std::string(name), result.setter());
  return result.wait();
}

Result<std::vector<ListedLock>> Client::list(std::string_view prefix) const {
  if (core_->on_io_thread()) return on_io_thread_error("Client::list");
  detail::SyncWait<Result<std::vector<std::string>>> found;
  core_->names(std::string(prefix), found.setter());
  auto names = found.wait();
  if (!names.ok()) return names.status();
  std::sort(names->begin(), names->end());
  names->erase(std::unique(names->begin(), names->end()), names->end());
  std::vector<ListedLock> out;
  for (std::string& name : *names) {
    if (!name.starts_with(prefix)) continue;
    auto info = inspect(name);
    // A key of the store's that names no valid lock (written by something
    // else) is not one of ours.
    if (!info.ok() && info.status().code() == Errc::invalid_argument) continue;
    if (!info.ok()) return info.status();
    if (info->held) out.push_back({std::move(name), std::move(*info)});
  }
  return out;
}

std::string_view version() noexcept { return DLOCK_VERSION_STRING; }

std::string Client::random_owner() { return detail::random_token(); }

ClientStats Client::stats() const { return core_->stats(); }

const ClientOptions& Client::options() const { return core_->options(); }

}  // namespace dlock

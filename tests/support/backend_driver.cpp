#include "support/backend_driver.hpp"

#include <boost/asio/post.hpp>
#include <chrono>
#include <future>
#include <stdexcept>

#include "backend_registry.hpp"

namespace dlock::test {

namespace asio = boost::asio;

BackendMaker maker_of(const std::string& url) {
  // The factory may keep a reference to the options: they live as long as
  // the maker, which the driver keeps.
  auto options = std::make_shared<ClientOptions>();
  return [url, options](asio::io_context& io) -> std::unique_ptr<detail::Backend> {
    detail::BackendContext context{io, *options, [](LogLevel, std::string_view) {}};
    auto backend = detail::make_backend(url, context);
    if (!backend.ok()) throw std::runtime_error(url + ": " + backend.status().to_string());
    return std::move(*backend);
  };
}

BackendDriver::BackendDriver(const BackendMaker& make) : make_(make), work_(asio::make_work_guard(io_)) {
  backend_ = make_(io_);
  caps_ = backend_->capabilities();
  backend_->set_events({});
  thread_ = std::thread([this] { io_.run(); });
  const Status started = call<Status>([this](auto done) { backend_->start(std::move(done)); });
  if (!started.ok()) {
    stop();
    throw std::runtime_error("the backend did not start: " + started.to_string());
  }
}

BackendDriver::~BackendDriver() { stop(); }

void BackendDriver::stop() {
  if (!thread_.joinable()) return;
  asio::post(io_, [this] {
    backend_->close();
    work_.reset();
  });
  thread_.join();
}

template <class T, class F>
T BackendDriver::call(F start) {
  auto answer = std::make_shared<std::promise<T>>();
  auto got = answer->get_future();
  asio::post(
      io_, [start = std::move(start), answer]() mutable { start([answer](T r) { answer->set_value(std::move(r)); }); });
  if (got.wait_for(std::chrono::seconds(10)) != std::future_status::ready)
    return T(Status(Errc::timeout, "the backend did not answer within 10 s"));
  return got.get();
}

Result<detail::AcquireOutcome> BackendDriver::acquire(const detail::AcquireCall& c) {
  return call<Result<detail::AcquireOutcome>>([this, c](auto done) { backend_->acquire(c, std::move(done)); });
}

Result<detail::ReleaseOutcome> BackendDriver::release(const detail::ReleaseCall& c) {
  return call<Result<detail::ReleaseOutcome>>([this, c](auto done) { backend_->release(c, std::move(done)); });
}

Status BackendDriver::abandon(const detail::AbandonCall& c) {
  return call<Status>([this, c](auto done) { backend_->abandon(c, std::move(done)); });
}

Result<std::vector<detail::RenewOutcome>> BackendDriver::renew(const std::vector<detail::RenewCall>& calls) {
  return call<Result<std::vector<detail::RenewOutcome>>>(
      [this, calls](auto done) { backend_->renew(calls, std::move(done)); });
}

Result<LockInfo> BackendDriver::inspect(const std::string& name) {
  return call<Result<LockInfo>>([this, name](auto done) { backend_->inspect(name, std::move(done)); });
}

}  // namespace dlock::test

// dlock/asio.hpp: Asio completion tokens for the asynchronous API (opt-in;
// this header needs Boost.Asio, the rest of <dlock/...> does not).
//
//   boost::asio::awaitable<void> work(dlock::Client client) {
//     dlock::Lease lease = co_await dlock::async_acquire(
//         client, "orders:42", std::chrono::seconds(5), {}, boost::asio::use_awaitable);
//     co_await write_with_fence(lease.fence());
//     co_await dlock::async_release(client, std::move(lease), boost::asio::use_awaitable);
//   }
//
// Completion signatures: acquire void(boost::system::error_code, dlock::Lease)
// and release void(boost::system::error_code). The codes wrap dlock::Errc in
// dlock's error_category and compare equal to dlock::make_error_code(Errc);
// use_awaitable and use_future throw them as boost::system::system_error. The handler runs on its associated executor
// (for use_awaitable, the coroutine's); with none, on the client's I/O thread. Outstanding work is tracked, so a
// waiting io_context does not run out.
#ifndef DLOCK_ASIO_HPP_
#define DLOCK_ASIO_HPP_

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>

#include "dlock/client.hpp"
#include "dlock/export.hpp"

namespace dlock {

namespace asio_detail {
// A completion handler with a work guard on its executor, kept in a shared
// slot so the library's copyable callback can carry it.
template <class Handler>
class DLOCK_EXPORT Completion {
 public:
  explicit Completion(Handler h)
      : handler_(std::move(h)),
        work_(boost::asio::make_work_guard(
            boost::asio::get_associated_executor(handler_, boost::asio::system_executor()))) {}

  // Runs the handler on its executor with `args` (moved in, may be move-only).
  template <class... Args>
  static void complete(const std::shared_ptr<Completion>& self, Args... args) {
    auto ex = self->work_.get_executor();
    auto packed = std::make_shared<std::tuple<Args...>>(std::move(args)...);
    boost::asio::dispatch(ex, [self, packed]() mutable {
      auto h = std::move(self->handler_);
      self->work_.reset();
      std::apply([&h](auto&... a) { std::move(h)(std::move(a)...); }, *packed);
    });
  }

 private:
  Handler handler_;
  boost::asio::executor_work_guard<boost::asio::associated_executor_t<Handler, boost::asio::system_executor>> work_;
};
}  // namespace asio_detail

// Acquires `name`, waiting up to `wait` (see Client::acquire).
template <class CompletionToken>
auto async_acquire(const Client& client, std::string name, std::chrono::milliseconds wait, LockOptions options,
                   CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, Lease)>(
      [client](auto handler, std::string n, std::chrono::milliseconds w, LockOptions o) {
        using C = asio_detail::Completion<decltype(handler)>;
        auto c = std::make_shared<C>(std::move(handler));
        client.async_acquire(std::move(n), w, std::move(o), [c](Result<Lease> r) {
          if (r.ok())
            C::complete(c, boost::system::error_code(), std::move(r.value()));
          else
            C::complete(c, boost::system::error_code(make_error_code(r.code())), Lease());
        });
      },
      token, std::move(name), wait, std::move(options));
}

// Releases one level of `lease` (see Lease::release).
template <class CompletionToken>
auto async_release(const Client& client, Lease lease, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
      [client](auto handler, std::shared_ptr<Lease> l) {
        using C = asio_detail::Completion<decltype(handler)>;
        auto c = std::make_shared<C>(std::move(handler));
        client.async_release(std::move(*l), [c](Status s) {
          C::complete(c, s.ok() ? boost::system::error_code() : boost::system::error_code(make_error_code(s.code())));
        });
      },
      token, std::make_shared<Lease>(std::move(lease)));
}

}  // namespace dlock

#endif  // DLOCK_ASIO_HPP_

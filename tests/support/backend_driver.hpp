// One Backend driven from the test's thread, call by call: its own I/O loop
// on a thread of its own, each call posted there and its answer awaited (up
// to 10 s: an unanswered call is Errc::timeout). Below the client: no
// retries, waits, re-entry counting or watchdog, just what the backend and
// its server decide.
#ifndef DLOCK_TESTS_SUPPORT_BACKEND_DRIVER_HPP_
#define DLOCK_TESTS_SUPPORT_BACKEND_DRIVER_HPP_

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend.hpp"

namespace dlock::test {

using BackendMaker = std::function<std::unique_ptr<detail::Backend>(boost::asio::io_context&)>;

// A maker for `url`, as ClientCore::connect builds its backend (default
// options, no log).
BackendMaker maker_of(const std::string& url);

class BackendDriver {
 public:
  // Starts the backend; throws std::runtime_error if it does not start.
  explicit BackendDriver(const BackendMaker& make);
  ~BackendDriver();  // closes it and drains its loop
  BackendDriver(const BackendDriver&) = delete;
  BackendDriver& operator=(const BackendDriver&) = delete;

  const detail::Capabilities& capabilities() const { return caps_; }

  Result<detail::AcquireOutcome> acquire(const detail::AcquireCall& call);
  Result<detail::ReleaseOutcome> release(const detail::ReleaseCall& call);
  Status abandon(const detail::AbandonCall& call);
  Result<std::vector<detail::RenewOutcome>> renew(const std::vector<detail::RenewCall>& calls);
  Result<LockInfo> inspect(const std::string& name);

 private:
  template <class T, class F>
  T call(F start);
  void stop();

  BackendMaker make_;  // kept: what it captured may outlive the call
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::unique_ptr<detail::Backend> backend_;
  detail::Capabilities caps_;
  std::thread thread_;
};

}  // namespace dlock::test

#endif  // DLOCK_TESTS_SUPPORT_BACKEND_DRIVER_HPP_

// Backends by URL scheme. ClientCore asks the registry for the backend a URL
// names; each backend folder contributes its schemes, compiled in by CMake's
// DLOCK_WITH_<BACKEND> options (so a build without ZooKeeper does not link
// libzookeeper).
#ifndef DLOCK_BACKEND_REGISTRY_HPP_
#define DLOCK_BACKEND_REGISTRY_HPP_

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "backend.hpp"

namespace dlock::detail {

// What a factory gets: the client's loop, its options (a factory may fill
// in fields the URL sets and the caller left at their defaults) and its log.
struct BackendContext {
  boost::asio::io_context& io;
  ClientOptions& options;
  std::function<void(LogLevel, std::string_view)> log;
};

// invalid_argument naming the bad field, or a backend not yet started.
using BackendFactory = Result<std::unique_ptr<Backend>> (*)(std::string_view url, BackendContext& context);

struct BackendScheme {
  std::string_view scheme;  // "redis" for redis://...
  BackendFactory make;
};

// invalid_argument when ClientOptions::wait_replicas is set for a backend
// with no replicas to wait for (`backend` names it), so it is not ignored.
Status refuse_wait_replicas(const ClientOptions& options, std::string_view backend);

// A user and a password from the URL, replaced by ClientOptions' where those
// are set (so secrets need not appear in URLs); invalid_argument naming
// `auth` when only one of the two is left.
Status take_credentials(const ClientOptions& options, std::string& user, std::string& password, std::string_view auth);

// The schemes this build serves.
std::span<const BackendScheme> backend_schemes();

// The backend for `url`, or invalid_argument (an unknown scheme, or one this
// build was made without, names the schemes it has).
Result<std::unique_ptr<Backend>> make_backend(std::string_view url, BackendContext& context);

}  // namespace dlock::detail

#endif  // DLOCK_BACKEND_REGISTRY_HPP_

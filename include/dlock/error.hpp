// dlock/error.hpp: the one error type of the library.
//
// Every failure carries an Errc. Codes are chosen by what the caller should do
// next, and next_step() says it:
//
//   NextStep::retry    nothing happened on the server; the same call may
//                      succeed later (server unreachable, loading, failover).
//   NextStep::give_up  retrying the same call will fail the same way; fix the
//                      input, the configuration or the state first.
//   NextStep::unknown  the command may or may not have taken effect (a reply
//                      was lost after the request was sent). Never treat it as
//                      success or as a clean failure: a lock whose acquire is
//                      in doubt is released best-effort and expires by its lease.
//   NextStep::restart  the lock was lost under the work (Errc::lease_lost):
//                      acquire it again and redo the work from the start.
//
// Contention ("someone else holds the lock") is not an error for try_lock();
// it is a normal `false`. Asynchronous calls report it as Errc::busy (try once)
// or Errc::timeout (waited and gave up), both NextStep::retry.
//
// Thread safety: all types here are values; const methods are safe to call
// concurrently.
#ifndef DLOCK_ERROR_HPP_
#define DLOCK_ERROR_HPP_

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "dlock/export.hpp"

namespace dlock {

enum class Errc : int {
  ok = 0,
  // --- caller's input (give up) ---
  invalid_argument = 1,  // malformed URL, lease <= 0, empty or oversized name...
  // --- server/connection (retry) ---
  unavailable = 2,  // cannot connect, connection lost before the request was
                    // sent, server LOADING/BUSY/READONLY/MASTERDOWN
  timeout = 3,      // waited for a lock until the wait timeout; not acquired
  busy = 4,         // lock held by another owner (single attempt)
  // --- the outcome is unknown ---
  outcome_unknown = 5,  // request sent, reply lost (connection dropped or
                        // per-command timeout); may have taken effect
  // --- configuration or state (give up) ---
  auth_failed = 6,           // wrong user/password, or server requires AUTH
  tls_failed = 7,            // TLS handshake or certificate verification failed
  permission_denied = 8,     // ACL user may not run a command or touch a key
  wrong_type = 9,            // the lock's storage holds something else: a Redis
                             // key of another type (WRONGTYPE)
  not_owner = 10,            // release/renew of a lock held by another owner;
                             // nothing was touched
  not_held = 11,             // release of a lock this owner does not hold
                             // (double unlock, or the lease already expired)
  lease_lost = 12,           // the lease expired or was taken away while held
  server_error = 13,         // any other error reply from the server
  protocol_error = 14,       // the server sent something that is not RESP
  cancelled = 15,            // the client shut down or the caller cancelled
  precondition_failed = 16,  // the call is not allowed where it was made: a
                             // blocking call on the client's I/O thread
                             // (from a callback; use the async_ form)
  aborted = 17,              // a distributed transaction was decided to
                             // abort (a Try failed, its deadline passed, or
                             // its coordinator went away before deciding):
                             // its Cancels undo, or have undone, every Try
                             // (<dlock/tx.hpp>)
  in_doubt = 18,             // a distributed transaction's decision may or
                             // may not have been logged (the log's answer
                             // was lost and could not be read back in
                             // time): it will commit or abort, the same
                             // everywhere. Do not run it again under a new
                             // id; ask show(gid) later, or let recover()
                             // finish it (<dlock/tx.hpp>)
};

// What a caller should do next with a failure of this code:
//   retry    the same call may succeed later (nothing happened);
//   give_up  it will not succeed as asked (fix the input or configuration);
//   unknown  it may have taken effect: settle it before acting on it;
//   restart  the lock was lost under the work: acquire it again and redo
//            the work from the start (what was done under the lost lease
//            may have overlapped another holder's; fences tell which).
enum class NextStep { none, retry, give_up, unknown, restart };

// The next step for `code`. Errc::ok maps to NextStep::none.
DLOCK_EXPORT NextStep next_step(Errc code) noexcept;

// Short stable name of the code ("outcome_unknown"...).
DLOCK_EXPORT std::string_view to_string(Errc code) noexcept;
DLOCK_EXPORT std::string_view to_string(NextStep step) noexcept;

// std::error_code integration: the category is named "dlock".
DLOCK_EXPORT const std::error_category& error_category() noexcept;
DLOCK_EXPORT std::error_code make_error_code(Errc code) noexcept;

// A failure: code plus a one-line message meant for humans. Messages never
// contain passwords or lock tokens. The default-constructed Status is ok and
// allocates nothing.
class [[nodiscard]] DLOCK_EXPORT Status {
 public:
  Status() noexcept = default;
  Status(Errc code, std::string message) : code_(code), message_(std::move(message)) {}
  Status(Errc code, std::string message, std::string backend_code)
      : code_(code), message_(std::move(message)), backend_code_(std::move(backend_code)) {}

  bool ok() const noexcept { return code_ == Errc::ok; }
  explicit operator bool() const noexcept { return ok(); }
  Errc code() const noexcept { return code_; }
  NextStep next_step() const noexcept { return dlock::next_step(code_); }
  const std::string& message() const noexcept { return message_; }
  // The server's own code for the failure, when a server reply caused it:
  // the Redis error prefix ("WRONGTYPE", "NOPERM", "OOM"...), and in time a
  // PostgreSQL SQLSTATE or a ZooKeeper return code. Empty otherwise. For
  // retry policies finer than next_step().
  const std::string& backend_code() const noexcept { return backend_code_; }
  // "<code>: <message>"
  std::string to_string() const;

 private:
  Errc code_ = Errc::ok;
  std::string message_;
  std::string backend_code_;
};

// The exception thrown by the blocking API (Client::connect, Mutex::lock...).
class DLOCK_EXPORT Error : public std::runtime_error {
 public:
  explicit Error(Status status);
  Error(Errc code, const std::string& message) : Error(Status(code, message)) {}
  Errc code() const noexcept { return status_.code(); }
  NextStep next_step() const noexcept { return status_.next_step(); }
  const Status& status() const noexcept { return status_; }

 private:
  Status status_;
};

// Either a value or a failed Status. value() throws Error on failure.
template <class T>
class [[nodiscard]] DLOCK_EXPORT Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}        // NOLINT
  Result(Status status) : v_(std::in_place_index<1>, std::move(status)) {  // NOLINT
    if (std::get<1>(v_).ok()) v_.template emplace<1>(Errc::server_error, "failed Result without a code");
  }
  Result(Errc code, std::string message) : Result(Status(code, std::move(message))) {}

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  Errc code() const noexcept { return ok() ? Errc::ok : std::get<1>(v_).code(); }
  // The failure; an ok Status when the result holds a value.
  Status status() const { return ok() ? Status() : std::get<1>(v_); }

  T& value() & {
    check();
    return std::get<0>(v_);
  }
  const T& value() const& {
    check();
    return std::get<0>(v_);
  }
  T&& value() && {
    check();
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void check() const {
    if (!ok()) throw Error(std::get<1>(v_));
  }
  std::variant<T, Status> v_;
};

}  // namespace dlock

template <>
struct std::is_error_code_enum<dlock::Errc> : std::true_type {};

#endif  // DLOCK_ERROR_HPP_

// Error codes, their next steps and the std::error_category.
#include "dlock/error.hpp"

#include "dlock/options.hpp"

namespace dlock {

NextStep next_step(Errc code) noexcept {
  switch (code) {
    case Errc::ok:
      return NextStep::none;
    case Errc::unavailable:
    case Errc::timeout:
    case Errc::busy:
      return NextStep::retry;
    case Errc::outcome_unknown:
    case Errc::in_doubt:
      return NextStep::unknown;
    case Errc::lease_lost:
      return NextStep::restart;
    case Errc::invalid_argument:
    case Errc::auth_failed:
    case Errc::tls_failed:
    case Errc::permission_denied:
    case Errc::wrong_type:
    case Errc::not_owner:
    case Errc::not_held:
    case Errc::server_error:
    case Errc::protocol_error:
    case Errc::cancelled:
    case Errc::precondition_failed:
    case Errc::aborted:
      return NextStep::give_up;
  }
  return NextStep::give_up;
}

std::string_view to_string(Errc code) noexcept {
  switch (code) {
    case Errc::ok:
      return "ok";
    case Errc::invalid_argument:
      return "invalid_argument";
    case Errc::unavailable:
      return "unavailable";
    case Errc::timeout:
      return "timeout";
    case Errc::busy:
      return "busy";
    case Errc::outcome_unknown:
      return "outcome_unknown";
    case Errc::auth_failed:
      return "auth_failed";
    case Errc::tls_failed:
      return "tls_failed";
    case Errc::permission_denied:
      return "permission_denied";
    case Errc::wrong_type:
      return "wrong_type";
    case Errc::not_owner:
      return "not_owner";
    case Errc::not_held:
      return "not_held";
    case Errc::lease_lost:
      return "lease_lost";
    case Errc::server_error:
      return "server_error";
    case Errc::protocol_error:
      return "protocol_error";
    case Errc::cancelled:
      return "cancelled";
    case Errc::precondition_failed:
      return "precondition_failed";
    case Errc::aborted:
      return "aborted";
    case Errc::in_doubt:
      return "in_doubt";
  }
  return "unknown_code";
}

std::string_view to_string(NextStep step) noexcept {
  switch (step) {
    case NextStep::none:
      return "none";
    case NextStep::retry:
      return "retry";
    case NextStep::give_up:
      return "give_up";
    case NextStep::unknown:
      return "unknown";
    case NextStep::restart:
      return "restart";
  }
  return "unknown_step";
}

std::string_view to_string(LossReason reason) noexcept {
  switch (reason) {
    case LossReason::expired:
      return "expired";
    case LossReason::taken:
      return "taken";
    case LossReason::unreachable:
      return "unreachable";
    case LossReason::wrong_type:
      return "wrong_type";
  }
  return "unknown_reason";
}

namespace {
class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "dlock"; }
  std::string message(int ev) const override { return std::string(to_string(static_cast<Errc>(ev))); }
};
}  // namespace

const std::error_category& error_category() noexcept {
  static const Category category;
  return category;
}

std::error_code make_error_code(Errc code) noexcept { return {static_cast<int>(code), error_category()}; }

std::string Status::to_string() const {
  std::string out(dlock::to_string(code_));
  if (!message_.empty()) out.append(": ").append(message_);
  return out;
}

Error::Error(Status status) : std::runtime_error(status.to_string()), status_(std::move(status)) {}

}  // namespace dlock

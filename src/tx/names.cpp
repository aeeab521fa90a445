// The names of dlock::tx's enums (<dlock/tx.hpp>), as logs and the CLI show them.
#include "dlock/tx.hpp"

namespace dlock::tx {

std::string_view to_string(Outcome o) noexcept {
  switch (o) {
    case Outcome::success:
      return "success";
    case Outcome::failure:
      return "failure";
    case Outcome::ongoing:
      return "ongoing";
    case Outcome::unknown:
      return "unknown";
  }
  return "unknown";
}

std::string_view to_string(Op op) noexcept {
  switch (op) {
    case Op::try_:
      return "try";
    case Op::confirm:
      return "confirm";
    case Op::cancel:
      return "cancel";
  }
  return "?";
}

std::string_view to_string(State s) noexcept {
  switch (s) {
    case State::trying:
      return "trying";
    case State::committing:
      return "committing";
    case State::aborting:
      return "aborting";
    case State::committed:
      return "committed";
    case State::aborted:
      return "aborted";
  }
  return "?";
}

}  // namespace dlock::tx

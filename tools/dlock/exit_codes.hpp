// Exit codes of the dlock tool (sysexits.h values) and their mapping from
// library errors.
#ifndef DLOCK_TOOLS_EXIT_CODES_HPP_
#define DLOCK_TOOLS_EXIT_CODES_HPP_

#include <dlock/error.hpp>

namespace dlock::cli {

inline constexpr int kUsage = 64;        // EX_USAGE
inline constexpr int kNoInput = 66;      // EX_NOINPUT: no transaction log at the URL (tx list, show, retry)
inline constexpr int kUnavailable = 69;  // EX_UNAVAILABLE
inline constexpr int kSoftware = 70;     // EX_SOFTWARE
inline constexpr int kCantCreate = 73;   // EX_CANTCREAT: the default lock file's directory
inline constexpr int kTempFail = 75;     // EX_TEMPFAIL
inline constexpr int kNoPerm = 77;       // EX_NOPERM
inline constexpr int kLockLost = 79;     // dlock's own: the lock was lost while CMD ran

inline int exit_code_for(Errc code) {
  switch (code) {
    case Errc::ok:
      return 0;
    case Errc::invalid_argument:
      return kUsage;
    case Errc::unavailable:
    case Errc::outcome_unknown:
      return kUnavailable;
    case Errc::busy:
    case Errc::timeout:
      return kTempFail;
    case Errc::auth_failed:
    case Errc::tls_failed:
    case Errc::permission_denied:
      return kNoPerm;
    case Errc::lease_lost:
      return kLockLost;
    default:
      return kSoftware;
  }
}

}  // namespace dlock::cli

#endif  // DLOCK_TOOLS_EXIT_CODES_HPP_

// Exit codes of the dlock tool (sysexits.h values) and their mapping from
// library errors.
#ifndef DLOCK_TOOLS_EXIT_CODES_HPP_
#define DLOCK_TOOLS_EXIT_CODES_HPP_

#include <dlock/error.hpp>

#include <string>
#include <string_view>

namespace dlock::cli {

inline constexpr int kUsage = 64;        // EX_USAGE
inline constexpr int kUnavailable = 69;  // EX_UNAVAILABLE
inline constexpr int kSoftware = 70;     // EX_SOFTWARE
inline constexpr int kCantCreate = 73;   // EX_CANTCREAT: the default lock file's directory
inline constexpr int kTempFail = 75;     // EX_TEMPFAIL
inline constexpr int kNoPerm = 77;       // EX_NOPERM
inline constexpr int kLockLost = 79;     // dlock's own: the lock was lost while CMD ran

inline int exit_code_for(Errc code) {
  switch (code) {
    case Errc::ok: return 0;
    case Errc::invalid_argument: return kUsage;
    case Errc::unavailable:
    case Errc::outcome_unknown: return kUnavailable;
    case Errc::busy:
    case Errc::timeout: return kTempFail;
    case Errc::auth_failed:
    case Errc::tls_failed:
    case Errc::permission_denied: return kNoPerm;
    case Errc::lease_lost: return kLockLost;
    default: return kSoftware;
  }
}

// One line saying what to do about it.
inline std::string_view advice(Errc code) {
  switch (code) {
    case Errc::invalid_argument: return "check the URL and the option values (dlock --help)";
    case Errc::unavailable: return "is the server running and reachable? check --url / DLOCK_URL";
    case Errc::outcome_unknown: return "the server stopped answering mid-call; retry when it is healthy";
    case Errc::auth_failed: return "check the user and password in the URL";
    case Errc::tls_failed: return "check the server certificate and the cacert= parameter";
    case Errc::permission_denied: return "the ACL user needs EVALSHA/EVAL and access to the dlock:* keys";
    case Errc::wrong_type: return "the lock key holds other data: pick another name or prefix";
    default: return "see the message above";
  }
}


}  // namespace dlock::cli

#endif  // DLOCK_TOOLS_EXIT_CODES_HPP_

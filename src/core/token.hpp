// Random owner tokens.
#ifndef DLOCK_CORE_TOKEN_HPP_
#define DLOCK_CORE_TOKEN_HPP_

#include <cstdint>
#include <string>

namespace dlock::detail {

// 128 bits from OpenSSL's CSPRNG (seeded by the OS), as 22 base64url
// characters. Throws Error(server_error) if the CSPRNG fails, which it does
// only when the OS entropy source is broken.
std::string random_token();

// A uniformly random 64-bit value from the same CSPRNG (for backoff jitter
// that must not repeat across processes started together).
std::uint64_t random_u64();

// 16 lowercase hex digits from it: a client's id among a name's waiters
// (the same whatever folds case: PostgreSQL channel names, file names).
std::string random_hex16();

}  // namespace dlock::detail

#endif  // DLOCK_CORE_TOKEN_HPP_

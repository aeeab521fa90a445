#include "core/token.hpp"

#include <openssl/rand.h>

#include <array>

#include "dlock/error.hpp"

namespace dlock::detail {
namespace {
void fill(unsigned char* out, int n) {
  if (RAND_bytes(out, n) != 1) throw Error(Errc::server_error, "the OS random generator failed (RAND_bytes)");
}
}  // namespace

std::string random_token() {
  std::array<unsigned char, 16> bytes{};
  fill(bytes.data(), static_cast<int>(bytes.size()));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = kHex[bytes[i] >> 4];
    out[2 * i + 1] = kHex[bytes[i] & 0xF];
  }
  return out;
}

std::uint64_t random_u64() {
  std::array<unsigned char, 8> bytes{};
  fill(bytes.data(), static_cast<int>(bytes.size()));
  std::uint64_t v = 0;
  for (unsigned char b : bytes) v = (v << 8) | b;
  return v;
}

}  // namespace dlock::detail

#include "core/token.hpp"

#include <openssl/rand.h>
#include <pthread.h>

#include <array>
#include <atomic>
#include <cstring>

#include "dlock/error.hpp"

namespace dlock::detail {
namespace {
// CSPRNG bytes, drawn 512 at a time per thread: one RAND_bytes call costs
// about as much as a token's whole share of a lock round trip. A fork makes
// every buffer stale (the child must not repeat the parent's tokens).
std::atomic<unsigned> fork_generation{0};

void fill(unsigned char* out, int n) {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, [] { fork_generation.fetch_add(1); });
    return true;
  }();
  (void)registered;
  struct Buffer {
    std::array<unsigned char, 512> bytes;
    std::size_t used = 512;
    unsigned generation = 0;
  };
  thread_local Buffer buf;
  const unsigned gen = fork_generation.load();
  if (buf.generation != gen || buf.used + static_cast<std::size_t>(n) > buf.bytes.size()) {
    if (RAND_bytes(buf.bytes.data(), static_cast<int>(buf.bytes.size())) != 1)
      throw Error(Errc::server_error, "the OS random generator failed (RAND_bytes)");
    buf.used = 0;
    buf.generation = gen;
  }
  std::memcpy(out, buf.bytes.data() + buf.used, static_cast<std::size_t>(n));
  std::memset(buf.bytes.data() + buf.used, 0, static_cast<std::size_t>(n));  // handed out once
  buf.used += static_cast<std::size_t>(n);
}
}  // namespace

std::string random_token() {
  // 16 bytes, base64url without padding: 22 characters (the token is stored
  // in every held lock, so its length is Redis memory).
  std::array<unsigned char, 18> bytes{};  // 16 random + 2 zero for whole groups
  fill(bytes.data(), 16);
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve(24);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const unsigned v = (unsigned{bytes[i]} << 16) | (unsigned{bytes[i + 1]} << 8) | bytes[i + 2];
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(v >> shift) & 63];
  }
  out.resize(22);  // 128 bits = 21 full characters + 2 bits
  return out;
}

std::uint64_t random_u64() {
  std::array<unsigned char, 8> bytes{};
  fill(bytes.data(), static_cast<int>(bytes.size()));
  std::uint64_t v = 0;
  for (unsigned char b : bytes) v = (v << 8) | b;
  return v;
}

std::string random_hex16() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::uint64_t v = random_u64();
  std::string out;
  for (int i = 0; i < 16; ++i, v >>= 4) out += kHex[v & 15];
  return out;
}

}  // namespace dlock::detail

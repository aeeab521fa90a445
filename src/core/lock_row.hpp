// The lease-row lock, I/O-free: what a backend that keeps one record per held
// lock (SQLite's table, the test fake's map) decides for each call. The
// caller reads the record, asks here, and writes back what it is told, all
// in one transaction; the semantics are those of the Redis scripts
// (redis/scripts.cpp): owner- and grant-checked, replay-safe re-entry, no
// silent re-grant of a hold the caller believes it has.
#ifndef DLOCK_CORE_LOCK_ROW_HPP_
#define DLOCK_CORE_LOCK_ROW_HPP_

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>

#include "backend.hpp"

namespace dlock::detail {

// Times are milliseconds on a clock the backend chooses (SQLite: the host's
// boot clock; the fake: the steady clock).
inline constexpr std::int64_t kNoExpiry = std::numeric_limits<std::int64_t>::max();

struct LockRow {
  std::string owner;
  std::uint64_t grant = 0;
  unsigned depth = 1;
  std::uint64_t fence = 0;
  std::int64_t expires_ms = kNoExpiry;
  std::int64_t granted_ms = 0;  // when this grant was made (0: unknown)
  std::string info{};           // what its holder said of itself (AcquireCall::info)
};

struct RowAcquire {
  AcquireOutcome outcome;
  // The record to store (a fresh grant or a new level); nullopt: unchanged.
  std::optional<LockRow> write;
};

// `live`: the record under the name if it still holds (not expired, holder
// alive), else null. `expires_ms`: the expiry a grant gets. `next_fence` is
// called once, for a fresh grant only.
RowAcquire decide_acquire(const LockRow* live, const AcquireCall& call, std::int64_t now_ms, std::int64_t expires_ms,
                          const std::function<std::uint64_t()>& next_fence);

struct RowRelease {
  ReleaseOutcome outcome;
  enum class Write { none, update, erase } write = Write::none;
  LockRow row;  // for update: the record with its new depth
};

RowRelease decide_release(const LockRow* live, const ReleaseCall& call);

// renewed: the caller stores expires_ms = now + lease.
RenewOutcome decide_renew(const LockRow* live, const RenewCall& call);

}  // namespace dlock::detail

#endif  // DLOCK_CORE_LOCK_ROW_HPP_

#include "core/lock_row.hpp"

#include <algorithm>

namespace dlock::detail {

RowAcquire decide_acquire(const LockRow* live, const AcquireCall& call, std::int64_t now_ms, std::int64_t expires_ms,
                          const std::function<std::uint64_t()>& next_fence) {
  RowAcquire r;
  AcquireOutcome& out = r.outcome;
  const bool mine = live != nullptr && live->owner == call.owner && live->grant == call.grant;
  if (!mine && call.held > 0) {  // the caller's hold is gone: never re-create it
    out.kind = AcquireOutcome::Kind::lost;
    return r;
  }
  if (live == nullptr) {
    LockRow row{call.owner, call.grant, 1, next_fence(), expires_ms, now_ms, call.info};
    out.kind = AcquireOutcome::Kind::granted;
    out.fence = row.fence;
    out.depth = 1;
    r.write = std::move(row);
    return r;
  }
  if (!mine) {
    out.kind = AcquireOutcome::Kind::busy;
    out.hint = live->expires_ms == kNoExpiry
                   ? WaitHint::event()
                   : WaitHint::expiry(milliseconds(std::max<std::int64_t>(live->expires_ms - now_ms, 0)));
    return r;
  }
  LockRow row = *live;
  if (row.depth == call.held) {
    ++row.depth;                            // a new level
  } else if (row.depth != call.held + 1) {  // not a replay either
    out.kind = AcquireOutcome::Kind::mismatch;
    out.depth = row.depth;
    return r;
  }
  row.expires_ms = std::max(row.expires_ms, expires_ms);  // a level never shortens the lease
  out.kind = AcquireOutcome::Kind::granted;
  out.fence = row.fence;
  out.depth = row.depth;
  r.write = std::move(row);
  return r;
}

RowRelease decide_release(const LockRow* live, const ReleaseCall& call) {
  RowRelease r;
  ReleaseOutcome& out = r.outcome;
  if (live == nullptr) {
    out.kind = ReleaseOutcome::Kind::not_held;
    return r;
  }
  if (live->owner != call.owner || live->grant != call.grant) {
    out.kind = ReleaseOutcome::Kind::not_owner;
    return r;
  }
  r.row = *live;
  if (call.all || r.row.depth == call.held) {
    r.row.depth = call.all ? 0 : r.row.depth - 1;
    r.write = r.row.depth == 0 ? RowRelease::Write::erase : RowRelease::Write::update;
  } else if (r.row.depth != call.held - 1) {  // not a replay of this release
    out.kind = ReleaseOutcome::Kind::mismatch;
  }
  out.depth = r.row.depth;
  return r;
}

RenewOutcome decide_renew(const LockRow* live, const RenewCall& call) {
  if (live == nullptr) return RenewOutcome::expired;
  if (live->owner != call.owner || live->grant != call.grant) return RenewOutcome::taken;
  return RenewOutcome::renewed;
}

}  // namespace dlock::detail

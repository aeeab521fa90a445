// dlock/options.hpp: plain option structs. Every duration is a std::chrono
// duration measured on std::chrono::steady_clock; the comment of each field
// gives its default and what it trades.
#ifndef DLOCK_OPTIONS_HPP_
#define DLOCK_OPTIONS_HPP_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/export.hpp"

namespace dlock {

using std::chrono::milliseconds;

// Waits forever (wait timeouts only). Any wait of 100 years or more counts
// as forever: the steady clock cannot count much further.
inline constexpr milliseconds kForever = milliseconds::max();

// Bounds of a lease (fixed or watchdog). Shorter leases are lost before a
// holder can use them; longer ones are a lock nobody can recover from.
inline constexpr milliseconds kMinLease{10};
inline constexpr milliseconds kMaxLease{365LL * 24 * 3600 * 1000};  // one year

// Shortest watchdog lease (LockOptions::watchdog_lease). A grant or renewal
// sent at t is believed until t + lease - (lease/100 + 2 ms), and the next
// renewal leaves at t + renew_interval (a third of the lease by default): so
// each renewal has lease - lease/100 - 2 ms - renew_interval to make its
// round trip, timer wake-up included: 64 ms at 100 ms, 5 ms at 10 ms, which
// one scheduling delay overruns (a 10 ms lease was lost within a second).
// 100 ms leases held for 10 s on Redis and SQLite on a 2-core host at load
// 3.5; longer ones are kinder to a busy host.
inline constexpr milliseconds kMinWatchdogLease{100};

// Longest LockOptions::holder.
inline constexpr std::size_t kMaxHolderInfo = 256;

// A wait in any duration type as milliseconds: rounded up, <= 0 as 0, and
// saturated to kForever instead of overflowing.
template <class Rep, class Period>
constexpr milliseconds to_wait(const std::chrono::duration<Rep, Period>& d) {
  using LongMs = std::chrono::duration<long double, std::milli>;
  const long double ms = std::chrono::duration_cast<LongMs>(d).count();
  if (!(ms > 0)) return milliseconds(0);
  if (ms >= 100.0L * 365 * 24 * 3600 * 1000) return kForever;
  const auto whole = static_cast<milliseconds::rep>(ms);
  return milliseconds(static_cast<long double>(whole) < ms ? whole + 1 : whole);
}

enum class LogLevel { debug, info, warning, error };

// Receives the library's diagnostics. Called on the client's I/O thread, and
// on the caller's thread for a failed release in Mutex::unlock() or ~Lease:
// so it must be thread-safe, must not block and must not call back into the
// blocking API.
using Logger = std::function<void(LogLevel, std::string_view message)>;

struct ClientStats;  // dlock/client.hpp

struct DLOCK_EXPORT ClientOptions {
  // Store a short description of the holder with every grant, so that an
  // operator can ask who holds a lock (LockInfo::holder, `dlock status`,
  // `dlock list`): "PROGRAM[PID]@HOST" (LockOptions::holder_label replaces
  // PROGRAM; LockOptions::holder replaces the whole). It names no user,
  // argument or environment. false: store nothing unless
  // LockOptions::holder is given. Default: true.
  bool describe_holder = true;

  // Bound on one connection attempt: TCP connect, TLS handshake, AUTH, SELECT.
  // Default: 2 s.
  milliseconds connect_timeout{2000};

  // Bound on one command's reply. A command whose reply does not arrive in
  // time fails with Errc::outcome_unknown (it was sent) and, if the server
  // has sent nothing at all meanwhile, the connection is dropped and
  // re-established. Default: 2 s. Keep it well below the lock lease.
  // Redlock: a master's answer to an acquire or renewal counts only within
  // the per-node timeout, min(command_timeout, lease / 10) but at least
  // 10 ms; a master silent for longer counts as "no" for that round.
  milliseconds command_timeout{2000};

  // Reconnect backoff: doubles from min to max, with random jitter.
  // Defaults: 50 ms .. 2 s.
  milliseconds reconnect_backoff_min{50};
  milliseconds reconnect_backoff_max{2000};

  // Redis and Redlock: prefix of every key and channel the library touches.
  // Default: "dlock:".
  // A lock named N lives at "<prefix>{N}" (a hash, gone when released or
  // expired) with its wake-up channel "<prefix>{N}:wake"; the hash tag {N}
  // keeps them in one Redis Cluster slot. Fences come from one counter,
  // "<prefix>fence", shared by all names (so no key stays behind per name);
  // on a Redis Cluster each name has its own, "<prefix>{N}:f", in the
  // name's slot, since one counter for all would live on one master.
  std::string key_prefix = "dlock:";

  // Credentials that override the URL's, so secrets need not appear in URLs.
  // Empty: use the URL's (or none). Never logged.
  std::string username;
  std::string password;

  // Failover-safe master (redis://, rediss://, and the cluster and Sentinel
  // schemes; not Redlock): after every
  // grant and renewal, wait until this many replicas acknowledged it (Redis
  // WAIT, at most wait_timeout). A grant with fewer acknowledgements is undone
  // and fails with Errc::unavailable ("not replicated"); a renewal with fewer
  // counts as not renewed (retried; the lease is lost if none succeeds in
  // time). It narrows the failover window but does not close it: WAIT does
  // not fsync, and a failover may still promote a replica that did not
  // acknowledge. Cost: the WAIT travels in the same pipeline as the script
  // (no extra round trip), but every grant, busy answer and renewal waits
  // for the acknowledgements: up to wait_timeout while replicas lag (the
  // connection waits meanwhile).
  // Default 0: off.
  // The URL can set both, so tools turn it on without code:
  // redis://host:port?wait_replicas=1&wait_timeout_ms=200. A URL value
  // applies only to a field left at its default here (0, 100 ms); a field set
  // to anything else wins over the URL. So a URL's wait_replicas cannot be
  // turned off from ClientOptions: leave it out of the URL instead.
  // Refused (invalid_argument) with redlock:// URLs, in the URL as here.
  int wait_replicas = 0;
  milliseconds wait_timeout{100};

  // Diagnostics (failed background releases, reconnects, lost leases).
  // Default (empty): warnings and errors go to stderr with a "dlock:" prefix.
  // Called until the client's I/O thread ends: when the last Client handle
  // goes inside a callback, that is after the callback returns (the client
  // shuts down on its own), so the logger must not refer to what dies with
  // that handle.
  Logger logger;

  // Periodic statistics: when set, called with Client::stats() every
  // stats_interval (the first one interval after connect), on the client's
  // I/O thread, e.g. to publish dlock::to_prometheus(stats)
  // (<dlock/metrics.hpp>). It must not block nor call the blocking API, and
  // must not keep a Client copy (that would keep the client alive for good).
  // A throw is logged and the calls go on. The calls stop when the client
  // shuts down (the last handle goes); none runs after that returns.
  // stats_interval must be > 0 when on_stats is set. Defaults: none, 10 s.
  std::function<void(const ClientStats&)> on_stats;
  milliseconds stats_interval{10000};
};

// Why a held lock was lost; passed to LockOptions::on_lost.
enum class LossReason {
  expired,      // the key vanished: the lease ran out, or it was deleted
  taken,        // the key is held by another owner
  unreachable,  // the server could not confirm the lease before it ran out
                // (or within one renewal interval of losing the connection)
  wrong_type,   // the lock's storage now holds something else (Redis: a key
                // of another type)
};
DLOCK_EXPORT std::string_view to_string(LossReason reason) noexcept;

struct DLOCK_EXPORT LockOptions {
  // Fixed lease. Unset (default): the lock is held under the watchdog with
  // `watchdog_lease`, renewed every `renew_interval` until released. Set: the
  // lock expires this long after the grant and is never renewed; must be > 0.
  std::optional<milliseconds> lease;

  // Lease while under the watchdog. Default: 30 s. It bounds how long a
  // crashed holder blocks others. Must lie within [kMinWatchdogLease,
  // kMaxLease] = [100 ms, 1 year], and `lease` within [kMinLease, kMaxLease]
  // = [10 ms, 1 year] (nothing renews it): invalid_argument otherwise.
  milliseconds watchdog_lease{30000};

  // Renewal period under the watchdog. Default: 10 s. Must be below
  // watchdog_lease; a third of it leaves room for two failed renewals.
  // All leases of one Client are renewed together, in one round trip per tick.
  milliseconds renew_interval{10000};

  // The owner. Empty (default): each Mutex object, and each Client::acquire
  // call, gets a fresh random owner (128 bits from the OS CSPRNG). Acquiring a
  // lock again with the same owner while it holds it counts a re-entry; the
  // lock is freed when every re-entry is released. An owner must be used
  // through one Client only. At most 128 bytes.
  std::string owner;

  // How long acquire() keeps retrying after connection errors before
  // reporting them. The acquire script is idempotent, so retrying after a
  // lost reply is safe. Default: 2 s. Bounded by the wait timeout: a call
  // whose last attempt is still in doubt at its deadline (no reply) returns
  // Errc::timeout and the client undoes that attempt in the background.
  milliseconds error_retry{2000};

  // Grant in arrival order, across processes and machines: waiters join a
  // line kept on the server (ordered by a server-side ticket, kept alive by
  // their retries within a third of their lease, expired by server time
  // only), and a release hands the lock to the head of the line inside the
  // release itself. A waiter that dies leaves the line within its lease; one
  // that gives up leaves it at once. Default: false (whoever retries first
  // after a release wins). ZooKeeper is fair always: no effect there.
  // Redlock refuses it (invalid_argument).
  bool fair = false;

  // What inspect shows of the holder while this grant holds the lock
  // (LockInfo::holder; an Election's candidate id). Not a secret: anyone who
  // can inspect the lock reads it. At most kMaxHolderInfo bytes, no NUL
  // byte (else invalid_argument, before any I/O). Default:
  // empty, which stores the description ClientOptions::describe_holder
  // makes (or nothing when that is off).
  std::string holder;

  // The program part of that description, for a process that runs several
  // jobs ("nightly-report" rather than the binary's name). No NUL byte (else
  // invalid_argument). Default: empty (the program's name, as ps shows it).
  std::string holder_label;

  // Called once, on the client's I/O thread, when the lock is lost while held
  // (see LossReason). Must not block. The lease's lost_token() fires as well.
  // It runs in a handler of its own, so it may drop the last Client handle.
  std::function<void(LossReason)> on_lost;
};

}  // namespace dlock

#endif  // DLOCK_OPTIONS_HPP_

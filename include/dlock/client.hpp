// dlock/client.hpp: a connection to a lock service, and the lock calls.
//
//   auto client = dlock::Client::connect("redis://127.0.0.1:6379");
//   dlock::Lease lease = client.acquire("orders:42", std::chrono::seconds(5)).value();
//   write_with_fence(lease.fence());
//   lease.release();
//
// A Client is a cheap, copyable handle; copies share one set of connections
// and one background I/O thread, which pipelines the commands of all threads
// over one connection and keeps a second one for wake-up messages. The last
// copy to go shuts it down (held leases are released first).
//
// URL forms (every parameter: docs/api.md, "URLs"):
//   redis://[[user]:password@]host[:port][/db]         (port 6379, db 0)
//   rediss://...?cacert=PATH[&cert=PATH&key=PATH]      (TLS, certificate and name checked)
//   redis[s]://...?wait_replicas=N[&wait_timeout_ms=MS] (WAIT mode)
//   redis-cluster[+tls]://seed:port,seed:port,...       (Redis Cluster)
//   redis-sentinel[+tls]://s1[:26379],s2,.../MASTER[/db] (the master the sentinels name)
//   redlock[+tls]://host:port,host:port,...[/db]       (Redlock over an odd number >= 3
//                                                      of independent masters; fences
//                                                      are weaker: docs/redis.md)
//   postgres[ql]://[user[:password]@]host[:port][/db]  (a lock table; ?table=, ?schema=)
//   zk://[user:password@]h1[:p1],h2,...[/chroot]       (ZooKeeper; ?session_timeout=)
//   sqlite:///absolute/path/locks.db                   (one machine, no server)
// Which of them a build serves depends on its backends (DLOCK_WITH_<BACKEND>).
// Percent-escapes are decoded in user and password. Unknown query parameters
// and malformed URLs fail with Errc::invalid_argument.
//
// Thread safety: every method may be called from any thread. The blocking
// methods must not be called from a callback running on the client's I/O
// thread (they fail with Errc::precondition_failed instead of deadlocking).
#ifndef DLOCK_CLIENT_HPP_
#define DLOCK_CLIENT_HPP_

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/export.hpp"
#include "dlock/lease.hpp"
#include "dlock/options.hpp"

namespace dlock {

namespace detail {
struct ClientFactory;
}  // namespace detail

// `url` safe to print or log: a password in it (user:password@, the
// password-only password@ form, or a query parameter whose name ends in
// "password") is replaced by "***"; the rest is kept.
// Works on malformed URLs too, and never throws.
DLOCK_EXPORT std::string describe_url(std::string_view url);

// The backend family a URL's scheme names: "redis" (redis, rediss,
// redis-cluster[+tls], redis-sentinel[+tls]), "redlock" (redlock,
// redlock+tls), "postgres" (postgres, postgresql), "sqlite", "zookeeper"
// (zk, zk+tls) or "etcd" (etcd, etcd+tls); empty for any other. Whether this build serves it is
// Client::connect's to say. ClientStats::backend is this of the client's URL.
DLOCK_EXPORT std::string_view backend_family(std::string_view url);

// What the server says about a lock right now (Client::inspect).
struct DLOCK_EXPORT LockInfo {
  bool held = false;
  std::uint64_t fence = 0;              // of the current grant; 0 when free
  std::uint64_t last_fence = 0;         // the fence counter now: the next grant
                                        // gets a higher fence (of any lock under
                                        // the prefix on one Redis server; of
                                        // this lock in a cluster or Sentinel)
  milliseconds remaining{0};            // lease left (PTTL); 0 when free, and
                                        // when a session keeps it (ZooKeeper)
  unsigned reentry_count = 0;           // 0 when free (ZooKeeper: 1 when held;
                                        // the holding client counts levels)
  std::optional<unsigned> waiters = 0;  // clients waiting for its release,
                                        // as the store sees them (a plain lock's
                                        // queue: Redis, PostgreSQL, SQLite; Redis's
                                        // single-key layouts: subscribers of the
                                        // name's channel; ZooKeeper, etcd: queue
                                        // nodes behind the holder's); nullopt
                                        // where the store cannot tell
  // Shared and counted locks (SharedMutex, Semaphore): the oldest grant
  // speaks for the lock.
  std::string holder;                    // what its holder said of itself: "PROGRAM[PID]@HOST"
                                         // by default (ClientOptions::describe_holder),
                                         // LockOptions::holder when given (Election: the
                                         // candidate id); empty if the grant stored none
  std::optional<milliseconds> held_for;  // since that grant, on the server's
                                         // clock (a plain Redis grant: from
                                         // the granting client's clock, so
                                         // their skew shows); nullopt when
                                         // free, and where the store cannot
                                         // tell (ZooKeeper)
  unsigned holders = 0;                  // grants held now (readers, permits)
  bool shared = false;                   // held in shared mode (readers, permits)
};

// Counters since the client was created; a snapshot (Client::stats(), and
// ClientOptions::on_stats). <dlock/metrics.hpp> renders it for Prometheus.
// Every field only grows, except leases_held.
struct DLOCK_EXPORT ClientStats {
  // Upper bounds (inclusive, in milliseconds) of the wait-time histogram's
  // buckets; wait_buckets has one more, for the waits above the last bound.
  static constexpr std::array<std::uint64_t, 15> kWaitBucketsMs = {1,    5,    10,   25,    50,    100,   250,   500,
                                                                   1000, 2500, 5000, 10000, 30000, 60000, 300000};

  std::string backend;  // "redis", "redlock", "postgres", "sqlite" or "zookeeper"
                        // (from the URL's scheme); empty for any other backend
  std::uint64_t commands_sent = 0;
  std::uint64_t reconnects = 0;
  std::uint64_t grants = 0;
  std::uint64_t late_grants = 0;  // replies past the lease's validity, undone
  std::uint64_t renewal_round_trips = 0;
  std::uint64_t leases_lost = 0;
  std::uint64_t release_failures = 0;  // failed releases nobody could be told about
  std::uint64_t leases_held = 0;       // distinct (name, owner) held now
  std::uint64_t wakeups = 0;           // waiters woken by a release notification
                                       // (1 per release is the ideal: no herd)

  // Acquire attempts the server answered "held by another owner": a try
  // that fails with Errc::busy is one, a waiting acquire counts each.
  std::uint64_t busy_answers = 0;
  // Acquire calls that waited (wait > 0, and found the lock busy), counted
  // when the wait ends, by how it ended: granted, timed out (Errc::timeout:
  // the wait ran out, or the server stayed silent to its end), or failed
  // with any other error. Waits the client's shutdown cancels are not counted.
  std::uint64_t waits_granted = 0;
  std::uint64_t waits_timed_out = 0;
  std::uint64_t waits_failed = 0;
  // How long those waits took, from the call to its end (steady clock):
  // wait_buckets[i] counts the waits of at most kWaitBucketsMs[i] ms and
  // more than the bound before (per bucket, not cumulative); the last one
  // those above every bound. wait_time_us_sum: their total, in microseconds.
  // The buckets add up to waits_granted + waits_timed_out + waits_failed.
  std::array<std::uint64_t, kWaitBucketsMs.size() + 1> wait_buckets{};
  std::uint64_t wait_time_us_sum = 0;
  // leases_lost by LossReason (they add up to leases_lost).
  std::uint64_t lost_expired = 0;
  std::uint64_t lost_taken = 0;
  std::uint64_t lost_unreachable = 0;
  std::uint64_t lost_wrong_type = 0;
  // Watchdog renewals, per lease: confirmed by the server, or not confirmed
  // (no answer, a connection error, or WAIT mode's replicas short: retried
  // until the lease can no longer be confirmed). A renewal the server
  // refuses is a loss (lost_expired, lost_taken, lost_wrong_type).
  std::uint64_t renewals = 0;
  std::uint64_t renewal_failures = 0;
  // Requests whose reply was lost (Errc::outcome_unknown: sent, but the
  // outcome is not known): acquire attempts, releases, renewal round trips.
  // The library settles them (retries, undoes); many mean a flaky link.
  std::uint64_t outcome_unknown = 0;
};

// One entry of Client::list.
struct DLOCK_EXPORT ListedLock {
  std::string name;
  LockInfo info;
};

class DLOCK_EXPORT Client {
 public:
  // Connects, authenticates and selects the database, waiting at most
  // options.connect_timeout. Throws Error: invalid_argument (bad URL or
  // options), unavailable (refused, unreachable, timed out), auth_failed,
  // tls_failed.
  static Client connect(std::string_view url, ClientOptions options = {});
  // The same, returning the failure instead of throwing.
  static Result<Client> try_connect(std::string_view url, ClientOptions options = {});

  // Acquires `name` (1 to 512 bytes, any bytes but NUL, the same lock on
  // every backend), waiting up to `wait` (kForever: no limit; zero: try
  // once). While waiting it sleeps until the holder's release is published or
  // the holder's lease would run out, whichever is first: no polling.
  // It returns by its deadline, answered or not: `wait` after the call, or
  // for a try (wait 0) the longer of ClientOptions::command_timeout and
  // LockOptions::error_retry after it (a server needs a round trip to
  // answer at all, and a lost reply is settled by retrying). A server that stays silent past
  // it (paused, cut off) gives Errc::timeout, and whatever the unanswered
  // attempt may still do is undone in the background.
  // Errors: Errc::busy (wait == 0 and held by another owner), Errc::timeout
  // (waited `wait`, or no answer by the deadline), invalid_argument, wrong_type, lease_lost (a re-entry
  // found this owner's lease gone), and connection errors that outlasted
  // options.error_retry (unavailable, outcome_unknown, auth_failed...).
  Result<Lease> acquire(std::string_view name, milliseconds wait, const LockOptions& options = {}) const;
  // acquire(name, 0, options).
  Result<Lease> try_acquire(std::string_view name, const LockOptions& options = {}) const;

  // Asynchronous acquire: `done` runs exactly once, on the client's I/O
  // thread (it must not block). See <dlock/asio.hpp> for Asio completion
  // tokens (use_awaitable, use_future, callbacks on your executor).
  void async_acquire(std::string name, milliseconds wait, LockOptions options,
                     std::function<void(Result<Lease>)> done) const;
  // Asynchronous release of one level; `done` as for async_acquire.
  void async_release(Lease lease, std::function<void(Status)> done) const;

  // Reads the lock's state from the server (one round trip).
  Result<LockInfo> inspect(std::string_view name) const;

  // The locks held now whose names start with `prefix` (empty: every lock
  // of this client's store), sorted by name. Finds the names (Redis: SCAN of
  // the key prefix; SQL: the lock table; ZooKeeper: the lock parent's
  // children) and inspects each; a lock freed meanwhile is left out. Meant
  // for operators: it reads the whole key space, not for a hot path.
  Result<std::vector<ListedLock>> list(std::string_view prefix = {}) const;

  // A fresh random owner id (128 bits from the OS CSPRNG, 22 base64url chars).
  static std::string random_owner();

  ClientStats stats() const;
  const ClientOptions& options() const;

 private:
  explicit Client(std::shared_ptr<detail::ClientCore> core) noexcept;
  friend class Mutex;
  friend class SharedMutex;
  friend class Semaphore;
  friend class Election;
  friend struct detail::ClientFactory;  // clients over a given backend (tests)
  std::shared_ptr<detail::ClientCore> core_;
};

}  // namespace dlock

#endif  // DLOCK_CLIENT_HPP_

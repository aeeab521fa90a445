// The Redis backend: lock scripts on a pipelined command connection, release
// notifications on a second, subscribed connection.
#ifndef DLOCK_REDIS_REDIS_BACKEND_HPP_
#define DLOCK_REDIS_REDIS_BACKEND_HPP_

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "backend.hpp"
#include "redis/connection.hpp"

namespace dlock::redis {

// Failover-safe mode: after each grant and renewal, WAIT for `replicas`
// acknowledgements (at most `timeout`). A grant with fewer is undone and fails
// with unavailable; a renewal with fewer fails (not renewed). 0: off.
struct ReplicaWait {
  int replicas = 0;
  milliseconds timeout{100};
};

std::unique_ptr<detail::Backend> make_redis_backend(boost::asio::io_context& io, ConnectionConfig config,
                                                    std::string key_prefix, ReplicaWait wait = {});

// A Redlock master: one server as above, with the blocking fast path also
// in two halves, so a Redlock round writes to every master before it reads
// any answer and costs the slowest master's round trip, not their sum.
class RedlockMaster : public detail::Backend {
 public:
  // A request written on a pooled blocking connection, its answer unread.
  class Pending {
   public:
    virtual ~Pending() = default;
    // The connection's socket, to poll for the answer (-1: broken, the
    // answer is an error at once).
    virtual int fd() const = 0;
  };
  using Sent = std::optional<Result<std::unique_ptr<Pending>>>;
  // acquire() and release() as calls of Redlock round `round` (0: none):
  // the scripts keep the round with the grant, so a late undo of a failed
  // round leaves a later round's grant alone.
  virtual void acquire_round(const detail::AcquireCall& call, std::uint64_t round,
                             std::function<void(Result<detail::AcquireOutcome>)> done) = 0;
  virtual void release_round(const detail::ReleaseCall& call, std::uint64_t round,
                             std::function<void(Result<detail::ReleaseOutcome>)> done) = 0;
  // From any thread. nullopt: no fast path here (TLS), or `pooled_only` and
  // no connection is open (so a slow connect to one master does not delay
  // the others' requests: they go first); an error: nothing was written
  // (unavailable), or only part (outcome_unknown). A connection opened for
  // it waits for its handshake until `by` at most.
  virtual Sent send_acquire_now(const detail::AcquireCall& call, std::uint64_t round,
                                std::chrono::steady_clock::time_point by, bool pooled_only) = 0;
  virtual Sent send_release_now(const detail::ReleaseCall& call, std::uint64_t round,
                                std::chrono::steady_clock::time_point by, bool pooled_only) = 0;
  // The answer of a send_*_now of the same kind, by `by` (outcome_unknown
  // after it). Each Pending is answered once. `readable`: the caller's poll
  // saw its socket readable.
  virtual Result<detail::AcquireOutcome> acquire_answer(Pending& sent, std::chrono::steady_clock::time_point by,
                                                        bool readable = false) = 0;
  virtual Result<detail::ReleaseOutcome> release_answer(Pending& sent, std::chrono::steady_clock::time_point by,
                                                        bool readable = false) = 0;
  // open_blocking(), waiting for the connect and handshake `patience` at
  // most (a silent master must not hold up the client's connect()).
  virtual void open_blocking_within(milliseconds patience) = 0;
};
std::unique_ptr<RedlockMaster> make_redlock_master(boost::asio::io_context& io, ConnectionConfig config,
                                                   std::string key_prefix);

// Redis Cluster from its seed nodes (at least one): the same scripts, each
// sent to the master of its lock's slot (route.hpp), fences per name
// (keys.hpp), the watchdog's renewals split by slot.
std::unique_ptr<detail::Backend> make_redis_cluster_backend(boost::asio::io_context& io,
                                                            std::vector<ConnectionConfig> seeds, std::string key_prefix,
                                                            ReplicaWait wait = {});

// A master found through Sentinel (route.hpp), followed across failovers,
// with fences per name as in a cluster: a failover that lost the last
// increments still issues larger fences.
std::unique_ptr<detail::Backend> make_redis_sentinel_backend(boost::asio::io_context& io,
                                                             std::vector<ConnectionConfig> sentinels,
                                                             ConnectionConfig master, std::string master_name,
                                                             std::string key_prefix, ReplicaWait wait = {});

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_REDIS_BACKEND_HPP_

// Blocking calls to an etcd cluster over its v3 gRPC API, each bounded by
// the caller's deadline (steady clock): the I/O layer the etcd backend
// stands on. No gRPC or protobuf header here: the generated code stays in
// etcd_rpc.cpp.
//
// Outcomes: a read that gets no answer is unavailable (retry); a write that
// gets none (deadline, a member gone mid-call) is outcome_unknown, since
// it may have been applied. With user and password set, the client
// authenticates once and sends the token with every call, authenticating
// again when the server says the token expired.
#ifndef DLOCK_ETCD_ETCD_RPC_HPP_
#define DLOCK_ETCD_ETCD_RPC_HPP_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/options.hpp"

namespace dlock::etcd {

using Clock = std::chrono::steady_clock;

struct KeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;  // the cluster-wide revision that created it
  std::int64_t mod_revision = 0;
  std::int64_t version = 0;
  std::int64_t lease = 0;  // 0: none
};

struct EtcdConfig {
  std::vector<std::string> endpoints;  // "host:port", tried in turn
  std::string user;                    // empty: no authentication
  std::string password;
  // TLS: the server's certificate is verified against `ca_file` (empty:
  // the system's roots) and its name or IP address; `cert_file` and
  // `key_file` identify this client where the server asks (both or none).
  bool tls = false;
  std::string ca_file, cert_file, key_file;
  // Where gRPC's own log lines go (a handshake's failure, say) while this
  // client lives, as debug; none reach stderr. Empty: dropped.
  std::function<void(LogLevel, std::string_view)> log;
};

// The end of the range holding every key that starts with `prefix`
// (etcd's clientv3.GetPrefixRangeEnd).
std::string prefix_end(std::string_view prefix);

class EtcdRpc {
 public:
  // Connects to the first endpoint that answers a status call by `by`.
  static Result<std::unique_ptr<EtcdRpc>> connect(EtcdConfig config, Clock::time_point by);
  ~EtcdRpc();
  EtcdRpc(const EtcdRpc&) = delete;
  EtcdRpc& operator=(const EtcdRpc&) = delete;

  struct Range {
    std::int64_t revision = 0;  // the store's revision when read
    std::vector<KeyValue> kvs;
  };
  // The keys in [key, range_end) (range_end empty: `key` alone), by key.
  Result<Range> range(std::string_view key, std::string_view range_end, Clock::time_point by);
  // The key created last before `max_create_revision` among those starting
  // with `prefix` (etcd's Mutex: the waiter just before one); none: empty.
  Result<Range> last_created_before(std::string_view prefix, std::int64_t max_create_revision, Clock::time_point by);
  // The revision of the write.
  Result<std::int64_t> put(std::string_view key, std::string_view value, std::int64_t lease, Clock::time_point by);
  // How many keys were deleted.
  Result<std::int64_t> erase(std::string_view key, Clock::time_point by);

  // Puts key = value under `lease` unless the key exists (a transaction
  // comparing its create revision with 0), and reads the key either way.
  struct Created {
    bool created = false;
    KeyValue kv;                // the key as it is now (this write's, or the one there)
    std::int64_t revision = 0;  // the store's revision after the transaction
  };
  Result<Created> create(std::string_view key, std::string_view value, std::int64_t lease, Clock::time_point by);

  // A lease of `ttl_seconds`: its id.
  Result<std::int64_t> lease_grant(std::int64_t ttl_seconds, Clock::time_point by);
  Status lease_revoke(std::int64_t id, Clock::time_point by);
  // Seconds left on the lease; -1: it is gone.
  Result<std::int64_t> lease_time_to_live(std::int64_t id, Clock::time_point by);

  struct MemberStatus {
    std::uint64_t member_id = 0;
    std::uint64_t leader = 0;
    std::uint64_t raft_term = 0;
    std::string version;
  };
  Result<MemberStatus> status(Clock::time_point by);
  // Authenticates again (a stream refused for its token); ok without a user.
  Status reauthenticate(Clock::time_point by);

  // ---- Asynchronous calls: `done` runs exactly once, on a gRPC thread ----
  // (never inline). Destroying the EtcdRpc cancels the calls still out and
  // waits for their `done`.
  template <class T>
  using Done = std::function<void(Result<T>)>;

  // The lock's one round trip (etcd's Mutex.tryAcquire): puts `key` =
  // `value` under `lease` unless the key exists, then reads the key and
  // every key starting with `line`, oldest (lowest create revision) first.
  struct Line {
    bool created = false;        // this call made the key
    KeyValue mine;               // the key as it is now
    std::vector<KeyValue> keys;  // the line, oldest first
    std::int64_t revision = 0;   // the store's revision after the call
  };
  void join_line(std::string key, std::string value, std::int64_t lease, std::string line, Clock::time_point by,
                 Done<Line> done);
  // The same on the caller's thread, blocking until answered or `by`.
  Result<Line> join_line_now(const std::string& key, std::string value, std::int64_t lease, const std::string& line,
                             Clock::time_point by);
  // Every key starting with `prefix`, oldest first (keys_only: no values).
  void read_line(std::string prefix, bool keys_only, Clock::time_point by, Done<Range> done);
  // Deletes `key` if it is still the one created at `create_revision` (a
  // delayed release never removes a later key of the same name; 0: whichever
  // it is).
  struct Erased {
    bool deleted = false;       // false: it was not there
    std::int64_t revision = 0;  // the store's revision after the call
  };
  void erase_created(std::string key, std::int64_t create_revision, Clock::time_point by, Done<Erased> done);
  Result<Erased> erase_created_now(std::string key, std::int64_t create_revision, Clock::time_point by);
  struct LeaseGrant {
    std::int64_t id = 0;
    std::int64_t ttl_seconds = 0;  // as granted (the server raises one below its minimum)
  };
  void grant_lease(std::int64_t ttl_seconds, Clock::time_point by, Done<LeaseGrant> done);
  void revoke_lease(std::int64_t id, Clock::time_point by, Done<bool> done);

  // ---- Streams ----
  class KeepAlive;
  class Watches;
  // A lease keep-alive stream (blocking, for one thread; cancel from any),
  // that ends by `by`.
  std::unique_ptr<KeepAlive> keep_alive(Clock::time_point by);
  // A watch stream for many watches (non-blocking; see Watches).
  struct WatchNews {
    std::int64_t watch_id = 0;
    bool created = false;               // the watch is in place
    bool changed = false;               // a watched key changed (with deletes only: it went)
    bool canceled = false;              // the server ended the watch
    std::int64_t compact_revision = 0;  // > 0: its start revision was compacted away
    std::int64_t revision = 0;          // the store's when sent (created: a watch from now sees later ones)
    std::string reason;
    bool progress = false;  // the answer to Watches::probe(): of no watch
  };
  // `news` runs on a gRPC thread for every answer; `ended` once, when the
  // stream ends (the server went, or cancel()). On a member other than
  // `avoid` (an index into the endpoints) when another is connected.
  std::unique_ptr<Watches> watches(std::function<void(const WatchNews&)> news, std::function<void(Status)> ended,
                                   std::optional<std::size_t> avoid = std::nullopt);
  // Member `member` stopped answering (a probe went unanswered): calls go
  // to the other members until `until`, while one of them is connected.
  void suspect(std::size_t member, Clock::time_point until);
  // Whether a member other than `member` is connected now.
  bool other_connected(std::size_t member) const;
  // "host:port" of member `member`.
  const std::string& endpoint(std::size_t member) const;

  struct Impl;

 private:
  explicit EtcdRpc(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class EtcdRpc::KeepAlive {
 public:
  ~KeepAlive();
  // Asks the leader to keep `lease` alive, and waits for its answer: the
  // seconds left on it (0 or less: the lease is gone), or an error once
  // the stream broke (make a new one).
  Result<std::int64_t> refresh(std::int64_t lease);
  // Ends a refresh() waiting on another thread (it then fails).
  void cancel();

  struct State;
  explicit KeepAlive(std::unique_ptr<State> s);

 private:
  std::unique_ptr<State> s_;
};

class EtcdRpc::Watches {
 public:
  // Cancels the stream and waits for `ended`.
  ~Watches();
  // Watches the keys in [key, range_end) (range_end empty: `key` alone)
  // from `from_revision` on (0: from now), for their deletion only (etcd's
  // NOPUT filter) or every change, under an id the caller picks. False:
  // the stream has ended.
  bool add(std::int64_t watch_id, const std::string& key, const std::string& range_end, std::int64_t from_revision,
           bool deletes_only);
  bool remove(std::int64_t watch_id);
  // Asks the member for the store's revision (a progress request): any
  // answer on the stream proves the member still serves it.
  bool probe();
  // When the stream last carried an answer (or was opened).
  Clock::time_point last_heard() const;
  // The member carrying it (an index into the endpoints).
  std::size_t member() const;
  void cancel();

  struct State;
  explicit Watches(std::shared_ptr<State> s);

 private:
  std::shared_ptr<State> s_;
};

}  // namespace dlock::etcd

#endif  // DLOCK_ETCD_ETCD_RPC_HPP_

// Where the Redis backend's commands go: the one server (redis://,
// rediss://), or, in Redis Cluster, the master serving the keys' slot,
// following MOVED and ASK redirects and waiting out TRYAGAIN and
// CLUSTERDOWN within the call's time. The backend builds commands and reads
// replies; only a Route knows the topology.
//
// Threading: every method on the io_context's thread, as Connection, but
// blocking_target, which any thread may call.
#ifndef DLOCK_REDIS_ROUTE_HPP_
#define DLOCK_REDIS_ROUTE_HPP_

#include <boost/asio/io_context.hpp>
#include <cctype>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/cluster_map.hpp"
#include "redis/connection.hpp"

namespace dlock::redis {

class Route {
 public:
  virtual ~Route() = default;

  // Connects (one server), or learns the slot map from the first seed that
  // answers (cluster). `done` runs once.
  virtual void start(std::function<void(Status)> done) = 0;
  // Fails every request with cancelled. Idempotent.
  virtual void close() = 0;

  // True in a cluster: keys must be sent by slot, and pub/sub and SCAN are
  // per node.
  virtual bool cluster() const = 0;
  // True when the node serving a key can change while the client runs
  // (cluster, Sentinel): a subscriber whose node is gone moves.
  virtual bool moves() const = 0;
  // Sends `commands` (each one formatted command, one reply each, on keys of
  // `slot` only; the slot is ignored by one server) pipelined to the node
  // that serves `slot`. The handler gets one reply per command, error
  // replies untranslated, or the transport's Status (connection.hpp).
  // timeout 0: the command timeout; redirects and waits stay within it.
  virtual void exec(int slot, std::vector<std::string> commands, ReplyHandler handler,
                    milliseconds timeout = milliseconds(0)) = 0;
  // The masters, by address ("" for the one server); exec_at sends to one
  // of them, as it is (SCAN, PUBSUB: what a node answers for itself).
  virtual std::vector<std::string> masters() const = 0;
  virtual void exec_at(const std::string& master, std::vector<std::string> commands, ReplyHandler handler) = 0;
  // Where release notifications for `slot`'s keys are subscribed: the
  // server, or in a cluster the slot's master (a seed while the map is not
  // known). Classic pub/sub in a cluster subscribes at kSubscriberSlot's
  // master, the same node for every client (a script's PUBLISH reaches
  // every node; PUBSUB NUMSUB counts one node's); sharded at the slot's.
  virtual ConnectionConfig subscriber_config(int slot) const = 0;
  static constexpr int kSubscriberSlot = 0;
  // Re-learns the topology soon (a node's connection failed).
  virtual void refresh() = 0;
  // From any thread: the node a blocking call on `slot`'s keys goes to now
  // (dialled with the backend's credentials, TLS settings and timeouts),
  // or nullopt while it is not known (no map yet, a failover under way):
  // the I/O thread's path then takes the call. A blocking call follows no
  // redirect; the I/O path does.
  virtual std::optional<ClusterNode> blocking_target(int slot) const = 0;

  // Called with false whenever a command connection drops.
  virtual void on_link(std::function<void(bool up)> handler) = 0;
  virtual std::uint64_t requests_sent() const = 0;
  virtual std::uint64_t reconnects() const = 0;
};

// One formatted command, as append_command writes it.
inline std::string command(const std::vector<std::string_view>& args) {
  std::string out;
  append_command(out, args);
  return out;
}

// Formatted commands as one payload (one write); a single one is moved.
inline std::string joined(std::vector<std::string>&& commands) {
  if (commands.size() == 1) return std::move(commands.front());
  std::string payload;
  for (const auto& c : commands) payload += c;
  return payload;
}

// `n`, an address the servers announced, as this client dials it: the
// URL's ?nat= entry for it, or itself.
inline ClusterNode reachable(ClusterNode n, const detail::RedisEndpoint& ep) {
  if (ep.nat.empty()) return n;
  std::string key = n.address();
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (auto it = ep.nat.find(key); it != ep.nat.end()) return ClusterNode{it->second.first, it->second.second};
  return n;
}

// One server: one pipelined connection.
std::unique_ptr<Route> make_single_route(boost::asio::io_context& io, ConnectionConfig config);
// A master found through Sentinel, followed across failovers.
std::unique_ptr<Route> make_sentinel_route(boost::asio::io_context& io, std::vector<ConnectionConfig> sentinels,
                                           ConnectionConfig master, std::string master_name);
// A cluster, from its seeds (each a full ConnectionConfig: credentials, TLS
// files and timeouts apply to every node it announces).
std::unique_ptr<Route> make_cluster_route(boost::asio::io_context& io, std::vector<ConnectionConfig> seeds);

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_ROUTE_HPP_

// One pub/sub connection to one node, for the waiters' release messages:
// (S)SUBSCRIBE and (S)UNSUBSCRIBE by channel, each confirmation matched to
// the command it answers, and the messages. Classic pub/sub (SUBSCRIBE,
// PUBLISH reaches every node of a cluster) or sharded (SSUBSCRIBE, Redis 7:
// the node must serve the channel's slot, and drops the channel itself when
// the slot moves away). The backend decides which node serves which
// channel; this class only talks to one.
//
// Threading: the io_context's thread only, as Connection.
#ifndef DLOCK_REDIS_SUBSCRIBER_HPP_
#define DLOCK_REDIS_SUBSCRIBER_HPP_

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "redis/connection.hpp"

namespace dlock::redis {

class Subscriber {
 public:
  struct Handlers {
    // A message published on `channel`.
    std::function<void(const std::string& channel, const std::string& payload)> message;
    // The answer to the newest SUBSCRIBE sent for `channel`: nullptr once
    // subscribed, else the server's error reply (NOPERM, MOVED...).
    std::function<void(const std::string& channel, const Reply* error)> subscribed;
    // Sharded: the server unsubscribed `channel` on its own (its slot moved).
    std::function<void(const std::string& channel)> dropped;
    // Up after each handshake, down when the connection drops or the first
    // attempt fails (down() says why); reconnects run on their own.
    std::function<void(bool up)> state;
  };

  Subscriber(boost::asio::io_context& io, ConnectionConfig config, bool sharded, Handlers handlers);
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  void subscribe(const std::string& channel);
  void unsubscribe(const std::string& channel);
  // True when the newest command sent for `channel` is a SUBSCRIBE not yet
  // answered: another would add nothing. (Behind an UNSUBSCRIBE in flight,
  // a new SUBSCRIBE is needed.)
  bool subscribing(const std::string& channel) const;
  // Stops reconnecting; handlers already queued may still run, so a closed
  // subscriber is kept until the backend goes.
  void close();

  bool ready() const { return conn_->ready(); }
  // Why it is not up, once a connection attempt failed or dropped.
  const std::optional<Status>& down() const { return down_; }
  std::uint64_t requests_sent() const { return conn_->requests_sent(); }
  std::uint64_t reconnects() const { return conn_->reconnects(); }

 private:
  struct Sent {
    bool subscribe;
    std::string channel;
  };
  void send(bool subscribe, const std::string& channel);
  bool pending(const std::string& channel) const;  // any command for it unanswered
  void on_push(Reply&& r);

  bool sharded_;
  Handlers handlers_;
  std::unique_ptr<Connection> conn_;
  std::deque<Sent> sent_;  // awaiting their push, oldest first
  std::optional<Status> down_;
};

}  // namespace dlock::redis

#endif  // DLOCK_REDIS_SUBSCRIBER_HPP_

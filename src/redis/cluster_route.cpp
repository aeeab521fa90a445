// Route for Redis Cluster: one pipelined connection per master, chosen by
// the slot map; redirects and cluster-state errors handled here, once, for
// every command the backend sends.
//
// Resending after a redirect is safe: MOVED, ASK, TRYAGAIN and CLUSTERDOWN
// mean the command did not run. What runs twice after an outcome_unknown is
// the backend's business (its scripts are replay-safe), not retried here.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <mutex>

#include "redis/cluster_map.hpp"
#include "redis/route.hpp"

namespace dlock::redis {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxRedirects = 5;
constexpr milliseconds kRefreshGap{100};  // at most one CLUSTER SLOTS per node set per gap

class ClusterRoute final : public Route {
 public:
  ClusterRoute(boost::asio::io_context& io, std::vector<ConnectionConfig> seeds)
      : io_(io), seeds_(std::move(seeds)), refresh_timer_(io) {}

  void start(std::function<void(Status)> done) override {
    ask_for_map(candidates(), 0, "", [done = std::move(done)](Status s) { done(s); });
  }

  void close() override {
    closed_ = true;
    refresh_timer_.cancel();
    for (auto& t : timers_) t->cancel();
    for (auto& [addr, conn] : nodes_) conn->close();
  }

  bool cluster() const override { return true; }
  bool moves() const override { return true; }

  void exec(int slot, std::vector<std::string> commands, ReplyHandler handler, milliseconds timeout) override {
    auto call = std::make_shared<Call>();
    call->slot = slot;
    call->commands = std::move(commands);
    call->handler = std::move(handler);
    call->deadline = Clock::now() + (timeout.count() > 0 ? timeout : seeds_.front().command_timeout);
    send(call, nullptr);
  }

  std::vector<std::string> masters() const override {
    std::vector<std::string> out;
    for (const ClusterNode& n : map_.masters()) out.push_back(n.address());
    return out;
  }

  void exec_at(const std::string& master, std::vector<std::string> commands, ReplyHandler handler) override {
    for (const ClusterNode& n : map_.masters())
      if (n.address() == master) {
        const std::size_t count = commands.size();
        return node(n).exec(joined(std::move(commands)), count, std::move(handler));
      }
    boost::asio::post(io_, [handler = std::move(handler), master] {
      handler(Status(Errc::unavailable, master + " is no longer a master of the cluster"), {});
    });
  }

  ConnectionConfig subscriber_config(int slot) const override {
    const ClusterNode* n = map_.master_of(slot);
    return n ? config_of(*n) : seeds_.front();
  }

  void refresh() override {
    if (closed_ || refreshing_) return;
    const auto now = Clock::now();
    if (now < next_refresh_) {
      if (refresh_armed_) return;
      refresh_armed_ = true;
      refresh_timer_.expires_at(next_refresh_);
      refresh_timer_.async_wait([this](const boost::system::error_code& ec) {
        refresh_armed_ = false;
        if (!ec) refresh();
      });
      return;
    }
    refreshing_ = true;
    next_refresh_ = now + kRefreshGap;
    ask_for_map(candidates(), 0, "", [this](Status) { refreshing_ = false; });
  }

  std::optional<ClusterNode> blocking_target(int slot) const override {
    std::lock_guard lk(map_mu_);
    const ClusterNode* n = map_.master_of(slot < 0 ? 0 : slot);
    if (!n) return std::nullopt;
    return *n;
  }

  void on_link(std::function<void(bool)> handler) override { link_ = std::move(handler); }
  std::uint64_t requests_sent() const override {
    std::uint64_t n = 0;
    for (const auto& [addr, conn] : nodes_) n += conn->requests_sent();
    return n;
  }
  std::uint64_t reconnects() const override {
    std::uint64_t n = 0;
    for (const auto& [addr, conn] : nodes_) n += conn->reconnects();
    return n;
  }

 private:
  struct Call {
    int slot = -1;
    std::vector<std::string> commands;
    ReplyHandler handler;
    Clock::time_point deadline;
    int redirects = 0;
    int waits = 0;
  };

  ConnectionConfig config_of(const ClusterNode& n) const {
    ConnectionConfig c = seeds_.front();
    c.endpoint.host = n.host;
    c.endpoint.port = n.port;
    c.endpoint.db = 0;
    return c;
  }

  Connection& node(const ClusterNode& n) {
    std::string address = n.address();
    if (auto it = nodes_.find(address); it != nodes_.end() && it->second) return *it->second;
    return node(address, config_of(n));  // a config is built once per node, not per call
  }
  Connection& node(const std::string& address, ConnectionConfig config) {
    auto& conn = nodes_[address];
    if (!conn) {
      config.name = "cmd " + address;
      conn = std::make_unique<Connection>(io_, std::move(config));
      conn->on_state([this](bool up) {
        if (!up && !closed_) refresh();  // a failover may follow
        if (link_) link_(up);
      });
      conn->start([](Status) {});
    }
    return *conn;
  }

  // The nodes to ask for the map: the known masters, then the seeds; those
  // connected now first (a dead master would cost a command timeout).
  std::vector<std::pair<std::string, ConnectionConfig>> candidates() const {
    std::vector<std::pair<std::string, ConnectionConfig>> out;
    for (const ClusterNode& n : map_.masters()) out.emplace_back(n.address(), config_of(n));
    for (const ConnectionConfig& s : seeds_) {
      ClusterNode n{s.endpoint.host, s.endpoint.port};
      if (std::none_of(out.begin(), out.end(), [&](const auto& c) { return c.first == n.address(); }))
        out.emplace_back(n.address(), s);
    }
    std::stable_partition(out.begin(), out.end(), [&](const auto& c) {
      auto it = nodes_.find(c.first);
      return it != nodes_.end() && it->second->ready();
    });
    return out;
  }

  // CLUSTER SLOTS from each candidate in turn until one answers with a map.
  void ask_for_map(std::vector<std::pair<std::string, ConnectionConfig>> nodes, std::size_t i, std::string why,
                   std::function<void(Status)> done) {
    if (closed_) return done(Status(Errc::cancelled, "client closed"));
    if (i >= nodes.size()) return done(Status(Errc::unavailable, "no cluster node gave its slot map: " + why));
    const std::string host = nodes[i].second.endpoint.host;
    const std::string address = nodes[i].first;
    node(address, nodes[i].second)
        .exec(command({"CLUSTER", "SLOTS"}), 1,
              [this, nodes = std::move(nodes), i, why = std::move(why), host, address, done = std::move(done)](
                  Status s, std::vector<Reply>&& replies) mutable {
                if (s.ok()) {
                  const Reply& r = replies.front();
                  if (r.is_error() && r.str.find("cluster support disabled") != std::string::npos)
                    return done(Status(Errc::invalid_argument,
                                       address + " is not a cluster node (cluster support disabled): use redis://"));
                  auto map = SlotMap::from_cluster_slots(r, host);
                  if (map.ok()) {
                    map->rename([this](const ClusterNode& n) { return reachable(n, seeds_.front().endpoint); });
                    std::lock_guard lk(map_mu_);  // blocking_target reads it from other threads
                    map_ = std::move(*map);
                    return done({});
                  }
                  s = map.status();
                }
                if (s.code() == Errc::auth_failed || s.code() == Errc::permission_denied) return done(s);
                why += (why.empty() ? "" : "; ") + address + ": " + s.message();
                ask_for_map(std::move(nodes), i + 1, std::move(why), std::move(done));
              });
  }

  void send(std::shared_ptr<Call> call, const ClusterNode* ask) {
    if (closed_) {  // never inline: the caller may be iterating
      boost::asio::post(io_, [call] { call->handler(Status(Errc::cancelled, "client closed"), {}); });
      return;
    }
    const ClusterNode* target = ask ? ask : map_.master_of(call->slot < 0 ? 0 : call->slot);
    if (!target) {
      refresh();
      return wait_and_resend(call, "no master serves slot " + std::to_string(call->slot) + " (CLUSTERDOWN)");
    }
    std::string payload;
    std::size_t expected = call->commands.size();
    if (ask) {
      // ASKING covers the one command after it.
      static const std::string asking = command({"ASKING"});
      for (const auto& c : call->commands) payload.append(asking).append(c);
      expected *= 2;
    } else {
      for (const auto& c : call->commands) payload += c;
    }
    const auto left = std::chrono::duration_cast<milliseconds>(call->deadline - Clock::now());
    const bool asked = ask != nullptr;
    const std::string answering_host = target->host;
    node(*target).exec(
        std::move(payload), expected,
        [this, call, asked, answering_host](Status s, std::vector<Reply>&& replies) mutable {
          if (!s.ok()) {
            if (s.code() == Errc::unavailable) refresh();  // never written: the node may be gone
            return call->handler(s, {});
          }
          if (asked) {
            std::vector<Reply> kept;
            for (std::size_t k = 1; k < replies.size(); k += 2) kept.push_back(std::move(replies[k]));
            replies = std::move(kept);
          }
          for (const Reply& r : replies) {
            if (!r.is_error()) continue;
            Redirect rd = parse_redirect(r.str);
            switch (rd.kind) {
              case Redirect::Kind::none:
                continue;
              case Redirect::Kind::moved:
              case Redirect::Kind::ask: {
                if (++call->redirects > kMaxRedirects) {
                  refresh();
                  return call->handler(Status(Errc::unavailable,
                                              "more than " + std::to_string(kMaxRedirects) +
                                                  " cluster redirects for one command (resharding?): " + r.str,
                                              rd.kind == Redirect::Kind::moved ? "MOVED" : "ASK"),
                                       {});
                }
                if (rd.node.host.empty()) rd.node.host = answering_host;  // the node does not know its address
                rd.node = reachable(std::move(rd.node), seeds_.front().endpoint);
                if (rd.kind == Redirect::Kind::moved) {
                  {
                    std::lock_guard lk(map_mu_);
                    map_.move(rd.slot, rd.node);
                  }
                  refresh();
                  return send(call, nullptr);
                }
                return send(call, &rd.node);
              }
              case Redirect::Kind::clusterdown:
                refresh();
                [[fallthrough]];
              case Redirect::Kind::tryagain:
                return wait_and_resend(call, r.str, std::move(replies));
            }
          }
          call->handler({}, std::move(replies));
        },
        std::max(left, milliseconds(1)));
  }

  // TRYAGAIN (keys of a migrating slot split between two nodes), CLUSTERDOWN
  // or an unserved slot: waits 10, 20, 40... 100 ms and sends again, while
  // the call's time lasts. Then the last replies go back as they are (the
  // backend reads an error reply as unavailable), or unavailable.
  void wait_and_resend(std::shared_ptr<Call> call, const std::string& why, std::vector<Reply> replies = {}) {
    const milliseconds pause{std::min(100, 10 << std::min(call->waits, 4))};
    if (Clock::now() + pause >= call->deadline) {
      if (!replies.empty()) return call->handler({}, std::move(replies));
      return call->handler(Status(Errc::unavailable, "cluster cannot serve the request now: " + why, "CLUSTERDOWN"),
                           {});
    }
    ++call->waits;
    call->redirects = 0;  // a new attempt: ASK, TRYAGAIN, ASK... lasts until the migration ends
    auto timer = std::make_shared<boost::asio::steady_timer>(io_, pause);
    timers_.push_back(timer);
    timer->async_wait([this, call, timer](const boost::system::error_code& ec) {
      timers_.erase(std::remove(timers_.begin(), timers_.end(), timer), timers_.end());
      if (ec) return call->handler(Status(Errc::cancelled, "client closed"), {});
      send(call, nullptr);
    });
  }

  boost::asio::io_context& io_;
  std::vector<ConnectionConfig> seeds_;
  // Written on the I/O thread under map_mu_, which is also read there
  // without it (the only writer); other threads read under map_mu_.
  SlotMap map_;
  mutable std::mutex map_mu_;
  std::map<std::string, std::unique_ptr<Connection>> nodes_;  // by address; kept while the client lives
  std::vector<std::shared_ptr<boost::asio::steady_timer>> timers_;
  boost::asio::steady_timer refresh_timer_;
  Clock::time_point next_refresh_{};
  bool refreshing_ = false;
  bool refresh_armed_ = false;
  bool closed_ = false;
  std::function<void(bool)> link_;
};

}  // namespace

std::unique_ptr<Route> make_cluster_route(boost::asio::io_context& io, std::vector<ConnectionConfig> seeds) {
  return std::make_unique<ClusterRoute>(io, std::move(seeds));
}

}  // namespace dlock::redis

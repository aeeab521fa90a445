// Route for a master found through Redis Sentinel: the sentinels are asked
// for the master's address (SENTINEL GET-MASTER-ADDR-BY-NAME), the node is
// checked to call itself master (ROLE), and a failover is followed from the
// sentinels' +switch-master announcements (every sentinel is subscribed,
// so one down costs nothing), a READONLY reply (we reached a demoted
// master) or a lost connection, whichever comes first.
//
// Like one server otherwise: one pipelined connection. The failover itself
// is asynchronous replication's: a grant the replica had not received is
// lost with the old master (docs/redis.md; wait_replicas narrows the window).
#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <mutex>
#include <optional>

#include "redis/errors.hpp"
#include "redis/route.hpp"

namespace dlock::redis {
namespace {

using Clock = std::chrono::steady_clock;

constexpr milliseconds kAskGap{100};  // at most one round of questions per gap

class SentinelRoute final : public Route {
 public:
  SentinelRoute(boost::asio::io_context& io, std::vector<ConnectionConfig> sentinels, ConnectionConfig master,
                std::string name)
      : io_(io),
        sentinels_(std::move(sentinels)),
        master_(std::move(master)),
        name_(std::move(name)),
        timer_(io),
        start_timer_(io) {}

  void start(std::function<void(Status)> done) override {
    starting_ = std::move(done);
    // start() ends by start_by() whatever happens meanwhile: the last
    // failure is final then.
    start_timer_.expires_at(start_by());
    start_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || closed_ || !starting_) return;
      if (last_failure_.ok()) {
        std::string asked;
        for (const auto& s : sentinels_) asked += (asked.empty() ? "" : ", ") + s.endpoint.describe();
        last_failure_ = Status(Errc::unavailable, "no sentinel told the master of '" + name_ + "' within " +
                                                      std::to_string((start_by() - started_at_) / milliseconds(1)) +
                                                      " ms (asked " + asked + ")");
      }
      finish_start(last_failure_, true);
    });
    for (std::size_t i = 0; i < sentinels_.size(); ++i) watch_switches(i);
    discover();
  }

  void close() override {
    closed_ = true;
    timer_.cancel();
    start_timer_.cancel();
    if (conn_) conn_->close();
    for (auto& [i, c] : watchers_) c->close();
    for (auto& [i, c] : askers_) c->close();
    for (auto& c : retired_) c->close();
    finish_start(Status(Errc::cancelled, "client closed"), true);
  }

  bool cluster() const override { return false; }
  bool moves() const override { return true; }

  void exec(int, std::vector<std::string> commands, ReplyHandler handler, milliseconds timeout) override {
    if (!conn_) {  // only before start() succeeded: the backend waits for it
      boost::asio::post(io_, [handler = std::move(handler), this] {
        handler(Status(Errc::unavailable, "no master of '" + name_ + "' known yet"), {});
      });
      return;
    }
    const std::size_t n = commands.size();
    conn_->exec(
        joined(std::move(commands)), n,
        [this, handler = std::move(handler)](Status s, std::vector<Reply>&& replies) {
          if (!closed_) {
            if (s.code() == Errc::unavailable) discover();  // not sent: the master may be gone
            if (s.ok())
              for (const Reply& r : replies)
                if (r.is_error() && translate_error(r.str).backend_code() == "READONLY") discover();  // demoted
          }
          handler(std::move(s), std::move(replies));
        },
        timeout);
  }
  std::vector<std::string> masters() const override { return {""}; }
  void exec_at(const std::string&, std::vector<std::string> commands, ReplyHandler handler) override {
    exec(-1, std::move(commands), std::move(handler), milliseconds(0));
  }
  ConnectionConfig subscriber_config(int) const override { return current_; }
  void refresh() override { discover(); }
  std::optional<ClusterNode> blocking_target(int) const override {
    std::lock_guard lk(target_mu_);
    return target_;
  }

  void on_link(std::function<void(bool)> handler) override { link_ = std::move(handler); }
  std::uint64_t requests_sent() const override {
    std::uint64_t n = conn_ ? conn_->requests_sent() : 0;
    for (const auto& c : retired_) n += c->requests_sent();
    return n;
  }
  std::uint64_t reconnects() const override {
    std::uint64_t n = conn_ ? conn_->reconnects() : 0;
    for (const auto& c : retired_) n += c->reconnects();
    return n;
  }

 private:
  Connection& asker(std::size_t i) {
    auto& c = askers_[i];
    if (!c) {
      ConnectionConfig cfg = sentinels_[i];
      cfg.name = "sentinel " + sentinels_[i].endpoint.describe();
      c = std::make_unique<Connection>(io_, std::move(cfg));
      c->start([](Status) {});
    }
    return *c;
  }

  // Asks the sentinels in turn, the one that answered last first.
  void discover() {
    if (closed_ || asking_) return;
    const auto now = Clock::now();
    if (now < next_ask_) return ask_again(std::chrono::duration_cast<milliseconds>(next_ask_ - now));
    asking_ = true;
    next_ask_ = now + kAskGap;
    ask(0, "", std::nullopt, switches_);
  }

  // `same`: the final answer every sentinel so far gave (none yet: nullopt;
  // answers that differ, or one that may change: ok): none knows such a
  // master (invalid_argument: a typo in the name), or each refused this
  // client (auth_failed, permission_denied: the sentinel credentials). Then
  // a starting client gives up at once.
  // `round`: the switches_ count when the round began; an answer from a
  // round that a +switch-master overtook is stale and dropped.
  void ask(std::size_t k, std::string why, std::optional<Errc> same, std::uint64_t round) {
    if (closed_) return;
    if (k >= sentinels_.size()) {
      asking_ = false;
      const bool final = same && *same != Errc::ok;
      Status s = !final ? Status(Errc::unavailable, "no sentinel told the master of '" + name_ + "': " + why)
                 : *same == Errc::invalid_argument
                     ? Status(Errc::invalid_argument, "no sentinel knows a master named '" + name_ + "': " + why)
                     : Status(*same, "every sentinel refused this client (sentinel_user, sentinel_password): " + why);
      if (starting_ && final) return finish_start(s, true);
      finish_start(s);
      return ask_again(starting_ ? milliseconds(200) : milliseconds(1000));
    }
    const std::size_t i = (first_ + k) % sentinels_.size();
    asker(i).exec(command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", name_}), 1,
                  [this, k, i, why = std::move(why), same, round](Status s, std::vector<Reply>&& replies) mutable {
                    if (closed_) return;
                    if (round != switches_) {  // a +switch-master came meanwhile: it is newer
                      asking_ = false;
                      return;
                    }
                    const std::string who = sentinels_[i].endpoint.describe();
                    if (s.ok()) {
                      const Reply& r = replies.front();
                      if (r.type == Reply::Type::array && r.elements.size() == 2) {
                        first_ = i;
                        asking_ = false;
                        return use(r.elements[0].str, r.elements[1].str);
                      }
                      s = r.is_nil()     ? Status(Errc::invalid_argument, "does not know it")
                          : r.is_error() ? translate_error(r.str)
                                         : Status(Errc::protocol_error, "an unexpected reply");
                    }
                    const Errc code = s.code();
                    const bool final =
                        code == Errc::invalid_argument || code == Errc::auth_failed || code == Errc::permission_denied;
                    if (!same)
                      same = final ? code : Errc::ok;
                    else if (*same != code)
                      same = Errc::ok;
                    why += (why.empty() ? "" : "; ") + who + ": " + s.message();
                    ask(k + 1, std::move(why), same, round);
                  });
  }

  void ask_again(milliseconds after) {
    if (closed_ || ask_armed_) return;
    ask_armed_ = true;
    timer_.expires_after(after);
    timer_.async_wait([this](const boost::system::error_code& ec) {
      ask_armed_ = false;
      if (!ec) discover();
    });
  }

  // The master is at host:port: connect there (if not already) and check
  // that it calls itself master.
  void use(const std::string& host, const std::string& port_text) {
    const long port = std::strtol(port_text.c_str(), nullptr, 10);
    if (port <= 0 || port > 65535)
      return finish_start(Status(Errc::protocol_error, "a sentinel told port " + port_text));
    const ClusterNode n = reachable({host, static_cast<std::uint16_t>(port)}, master_.endpoint);
    if (is_current(n)) {
      if (!conn_->ready()) return;  // reconnecting there on its own
      return check_role();
    }
    switch_to(n.host, n.port);
  }

  // Whether `n` (as dialled) is the master connected or connecting now.
  bool is_current(const ClusterNode& n) const {
    return conn_ && current_.endpoint.host == n.host && current_.endpoint.port == n.port;
  }

  void switch_to(const std::string& host, std::uint16_t port) {
    // The new connection first: closing the old one runs its handlers,
    // which may send again at once (a release resent after outcome_unknown)
    // and must find the new master, not the closed connection.
    std::unique_ptr<Connection> old = std::move(conn_);
    current_ = master_;
    current_.endpoint.host = host;
    current_.endpoint.port = port;
    current_.name = "cmd " + host + ":" + std::to_string(port);
    {
      std::lock_guard lk(target_mu_);
      target_ = ClusterNode{host, port};
    }
    conn_ = std::make_unique<Connection>(io_, current_);
    Connection* started = conn_.get();
    conn_->on_state([this, started](bool up) {
      if (closed_ || started != conn_.get()) return;
      if (!up) discover();  // maybe a failover
      if (up && starting_) check_role();
      if (link_) link_(up);
    });
    conn_->start([this, started](Status s) {
      if (closed_ || started != conn_.get()) return;
      if (!s.ok()) return finish_start(s);  // auth, TLS: final; else reconnecting on its own
      check_role();
    });
    if (old) {
      // Requests not yet written go nowhere: retried by the caller. Closed,
      // not destroyed: its handlers may still be queued.
      old->close(Status(Errc::unavailable, "the master of '" + name_ + "' moved to " + host + ":" +
                                               std::to_string(port) +
                                               " (Sentinel failover); the command was not sent"));
      retired_.push_back(std::move(old));
      // As a dropped link: renewals go out at once, validity counts from
      // the last confirmed one.
      if (link_) link_(false);
    }
  }

  void check_role() {
    Connection* asked = conn_.get();
    conn_->exec(command({"ROLE"}), 1, [this, asked](Status s, std::vector<Reply>&& replies) {
      if (closed_ || asked != conn_.get()) return;
      if (!s.ok()) return finish_start(s);
      const Reply& r = replies.front();
      // A user without the right to ROLE: trust the sentinels.
      if (r.is_error() || (r.type == Reply::Type::array && !r.elements.empty() && r.elements[0].str == "master"))
        return finish_start({});
      // Told before the failover finished, or by a sentinel on the wrong
      // side of a partition: ask again, another sentinel first.
      first_ = (first_ + 1) % sentinels_.size();
      finish_start(Status(Errc::unavailable, current_.endpoint.describe() + ", named master of '" + name_ +
                                                 "' by a sentinel, is not a master"));
      ask_again(milliseconds(200));
    });
  }

  // +switch-master "<name> <old ip> <old port> <new ip> <new port>", from
  // every sentinel (each connection reconnects on its own; a repeated
  // announcement of the same master changes nothing).
  void watch_switches(std::size_t i) {
    ConnectionConfig cfg = sentinels_[i];
    cfg.pubsub = true;
    cfg.name = "sentinel events " + sentinels_[i].endpoint.describe();
    auto& watcher = watchers_[i];
    watcher = std::make_unique<Connection>(io_, cfg);
    Connection* mine = watcher.get();
    watcher->on_push([this](Reply&& r) {
      if (closed_ || r.type != Reply::Type::array || r.elements.size() < 3 || r.elements[0].str != "message") return;
      const std::string& text = r.elements[2].str;
      std::vector<std::string> words;
      for (std::size_t at = 0; at < text.size();) {
        const auto space = text.find(' ', at);
        words.push_back(text.substr(at, space - at));
        if (space == std::string::npos) break;
        at = space + 1;
      }
      if (words.size() != 5 || words[0] != name_) return;
      const long port = std::strtol(words[4].c_str(), nullptr, 10);
      if (port > 0 && port <= 65535 &&
          is_current(reachable({words[3], static_cast<std::uint16_t>(port)}, master_.endpoint)))
        return;
      ++switches_;  // answers of a question asked before this are stale
      use(words[3], words[4]);
    });
    watcher->on_state([this, mine](bool up) {
      if (closed_ || !up) return;
      mine->exec(command({"SUBSCRIBE", "+switch-master"}), 0, [](Status, std::vector<Reply>&&) {});
      discover();  // a switch may have been missed meanwhile
    });
    watcher->start([](Status) {});  // reconnects on its own
  }

  Clock::time_point start_by() const { return started_at_ + sentinels_.front().connect_timeout * 2; }

  // The first outcome goes to start()'s caller. A transient failure before
  // start_by() is not final (a failover may be under way), unless `final`;
  // the start timer makes the last one final then.
  void finish_start(Status s, bool final = false) {
    if (!starting_) return;
    if (!final && !s.ok() &&
        (s.code() == Errc::unavailable || s.code() == Errc::outcome_unknown || s.code() == Errc::timeout ||
         s.code() == Errc::protocol_error) &&
        Clock::now() < start_by()) {
      last_failure_ = std::move(s);
      return;
    }
    start_timer_.cancel();
    std::exchange(starting_, nullptr)(s);
  }

  boost::asio::io_context& io_;
  std::vector<ConnectionConfig> sentinels_;
  ConnectionConfig master_;   // credentials, db, TLS, timeouts; no address
  ConnectionConfig current_;  // master_ at the address in use
  mutable std::mutex target_mu_;
  std::optional<ClusterNode> target_;  // current_'s address, for blocking calls from any thread
  std::string name_;
  std::unique_ptr<Connection> conn_;
  std::map<std::size_t, std::unique_ptr<Connection>> watchers_;  // by sentinel
  std::map<std::size_t, std::unique_ptr<Connection>> askers_;
  std::vector<std::unique_ptr<Connection>> retired_;  // closed, kept until the route goes
  boost::asio::steady_timer timer_;
  boost::asio::steady_timer start_timer_;
  Clock::time_point next_ask_{};
  Clock::time_point started_at_ = Clock::now();
  std::size_t first_ = 0;       // the sentinel that answered last
  std::uint64_t switches_ = 0;  // +switch-master announcements acted on
  bool asking_ = false;
  bool ask_armed_ = false;
  bool closed_ = false;
  Status last_failure_;
  std::function<void(Status)> starting_;
  std::function<void(bool)> link_;
};

}  // namespace

std::unique_ptr<Route> make_sentinel_route(boost::asio::io_context& io, std::vector<ConnectionConfig> sentinels,
                                           ConnectionConfig master, std::string master_name) {
  return std::make_unique<SentinelRoute>(io, std::move(sentinels), std::move(master), std::move(master_name));
}

}  // namespace dlock::redis

#include "redis/subscriber.hpp"

#include <algorithm>

namespace dlock::redis {

Subscriber::Subscriber(boost::asio::io_context& io, ConnectionConfig config, bool sharded, Handlers handlers)
    : sharded_(sharded), handlers_(std::move(handlers)) {
  config.pubsub = true;
  config.name = sharded ? "spubsub" : "pubsub";
  conn_ = std::make_unique<Connection>(io, std::move(config));
  conn_->on_push([this](Reply&& r) { on_push(std::move(r)); });
  conn_->on_state([this](bool up) {
    sent_.clear();  // what was in flight on the old connection is void
    if (up)
      down_.reset();
    else
      down_ = Status(Errc::unavailable, "the subscription connection is down");
    handlers_.state(up);
  });
  conn_->start([this](Status s) {
    if (s.ok() || s.code() == Errc::cancelled) return;  // cancelled: closed
    down_ = std::move(s);
    handlers_.state(false);
  });
}

void Subscriber::subscribe(const std::string& channel) { send(true, channel); }
void Subscriber::unsubscribe(const std::string& channel) { send(false, channel); }

void Subscriber::send(bool subscribe, const std::string& channel) {
  std::string payload;
  const char* verb = subscribe ? (sharded_ ? "SSUBSCRIBE" : "SUBSCRIBE") : (sharded_ ? "SUNSUBSCRIBE" : "UNSUBSCRIBE");
  append_command(payload, {verb, channel});
  sent_.push_back({subscribe, channel});
  conn_->exec(std::move(payload), 0, [](Status, std::vector<Reply>&&) {});
}

bool Subscriber::pending(const std::string& channel) const {
  return std::any_of(sent_.begin(), sent_.end(), [&](const Sent& c) { return c.channel == channel; });
}

bool Subscriber::subscribing(const std::string& channel) const {
  auto last = std::find_if(sent_.rbegin(), sent_.rend(), [&](const Sent& c) { return c.channel == channel; });
  return last != sent_.rend() && last->subscribe;
}

void Subscriber::close() { conn_->close(); }

// Pushes arrive in command order: each confirmation or error answers the
// oldest command sent. A subscription counts only when its SUBSCRIBE is the
// last command sent for the channel, so a stale confirmation (unwatch and
// watch in quick succession) is not taken for the new one. An unsubscribe
// that answers no command of ours is the server's own (sharded: the slot
// moved away).
void Subscriber::on_push(Reply&& r) {
  if (r.is_error()) {  // e.g. NOPERM (no channel rights), MOVED (sharded)
    if (sent_.empty()) return;
    Sent cmd = std::move(sent_.front());
    sent_.pop_front();
    if (cmd.subscribe && !pending(cmd.channel)) handlers_.subscribed(cmd.channel, &r);
    return;
  }
  if (r.type != Reply::Type::array || r.elements.size() < 3) return;
  const std::string& kind = r.elements[0].str;
  const std::string& channel = r.elements[1].str;
  if (kind == "message" || kind == "smessage") return handlers_.message(channel, r.elements[2].str);
  if (kind == "subscribe" || kind == "ssubscribe") {
    if (!sent_.empty()) sent_.pop_front();
    if (!pending(channel)) handlers_.subscribed(channel, nullptr);
    return;
  }
  if (kind != "unsubscribe" && kind != "sunsubscribe") return;
  const bool ours = !sent_.empty() && !sent_.front().subscribe && sent_.front().channel == channel;
  if (ours || !sharded_) {
    if (!sent_.empty()) sent_.pop_front();
    return;
  }
  handlers_.dropped(channel);
}

}  // namespace dlock::redis

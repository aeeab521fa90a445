// RedisBackend's release notifications (redis_backend_impl.hpp): one
// subscriber per node (one in classic pub/sub, the slot's master when
// sharded), watches moved when their node goes or their slot moves.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <charconv>

#include "redis/cluster_map.hpp"
#include "redis/errors.hpp"
#include "redis/keys.hpp"
#include "redis/redis_backend_impl.hpp"

namespace dlock::redis {

std::string RedisBackend::member_of(const AcquireCall& call, std::uint64_t round) const {
  if (!call.waits || round != 0 || !wake_one()) return {};
  // A line's waiter is found by its owner; its hand-over comes to its client.
  if (call.queued || call.mode != detail::LockMode::exclusive) return waiter_id_;
  return waiter_member(waiter_id_, call.attempt);
}

// Every waiter listens on its client's channel of the name; an observer
// (attempt 0) on the name's own, where every change is told.
std::string RedisBackend::channel_of(const detail::WatchKey& key) const {
  const auto keys = keyspace_.keys(key.name);
  return key.attempt == 0 || !wake_one() ? keys.channel : waiter_channel(keys, waiter_id_);
}

void RedisBackend::watch(const detail::WatchKey& key, std::function<void(Status)> ready) {
  const auto keys = keyspace_.keys(key.name);
  // node-redisson's own channel for the name, when it differs: watched
  // too (its releases are published there), without waiting for it.
  if (!keys.peer_channel.empty()) watch_channel(key.name, keys.peer_channel, [](Status) {});
  const std::string channel = channel_of(key);
  if (channel != keys.channel) {
    watches_[channel].personal = true;
    turns_.add(key.name, key.attempt);
  }
  watch_channel(key.name, channel, std::move(ready));
}

void RedisBackend::watch_channel(const std::string& name, const std::string& channel,
                                 std::function<void(Status)> ready) {
  Watch& w = watches_[channel];
  w.name = name;
  ++w.refs;
  if (w.confirmed) {
    post_all({std::move(ready)}, {});
    return;
  }
  const ConnectionConfig c = node_for(channel);
  if (w.node.empty()) w.node = node_key(c);
  Subscriber& sub = subscriber(w.node, c);
  // Without a subscription connection (refused, maxclients, down) the
  // waiter is told at once and waits on the holder's lease instead.
  if (!sub.ready() && sub.down()) {
    post_all({std::move(ready)}, *sub.down());
    return;
  }
  w.ready.push_back(std::move(ready));
  if (sub.ready() && !sub.subscribing(channel)) sub.subscribe(channel);
}

void RedisBackend::unwatch(const detail::WatchKey& key) {
  const auto keys = keyspace_.keys(key.name);
  if (!keys.peer_channel.empty()) unwatch_channel(keys.peer_channel);
  const std::string channel = channel_of(key);
  if (auto it = watches_.find(channel); it != watches_.end() && it->second.personal)
    turns_.remove(key.name, key.attempt);
  unwatch_channel(channel);
}

void RedisBackend::unwatch_channel(const std::string& channel) {
  auto it = watches_.find(channel);
  if (it == watches_.end() || --it->second.refs > 0) return;
  post_all(std::exchange(it->second.ready, {}), Status(Errc::cancelled, "unwatched"));
  const std::string node = std::move(it->second.node);
  watches_.erase(it);
  if (auto s = subs_.find(node); s != subs_.end() && s->second->ready()) s->second->unsubscribe(channel);
}

void RedisBackend::post_all(std::vector<std::function<void(Status)>> fs, const Status& s) {
  for (auto& f : fs) boost::asio::post(io_, [f = std::move(f), s] { f(s); });
}

void RedisBackend::fail_ready(const Status& s) {
  for (auto& [channel, w] : watches_) post_all(std::exchange(w.ready, {}), s);
}

ConnectionConfig RedisBackend::node_for(const std::string& channel) const {
  return route_->subscriber_config(sharded_ ? key_slot(channel) : Route::kSubscriberSlot);
}

std::string RedisBackend::node_key(const ConnectionConfig& c) {
  return c.endpoint.host + ":" + std::to_string(c.endpoint.port);
}

Subscriber& RedisBackend::subscriber(const std::string& key, const ConnectionConfig& c) {
  auto& slot = subs_[key];
  if (!slot) {
    Subscriber::Handlers h;
    h.message = [this](const std::string& channel, const std::string& payload) { on_message(channel, payload); };
    h.subscribed = [this, key](const std::string& channel, const Reply* error) { on_subscribed(key, channel, error); };
    h.dropped = [this, key](const std::string& channel) { on_dropped(key, channel); };
    h.state = [this, key](bool up) { on_subscriber_state(key, up); };
    slot = std::make_unique<Subscriber>(io_, c, sharded_, std::move(h));
  }
  return *slot;
}

void RedisBackend::on_subscriber_state(const std::string& key, bool up) {
  auto it = subs_.find(key);
  if (closed_ || it == subs_.end() || !it->second) return;
  Subscriber& sub = *it->second;
  if (up) {
    // Resubscribe everything; releases published while we were away are
    // lost, so every waiter retries once.
    for (auto& [channel, w] : watches_)
      if (w.node == key && !sub.subscribing(channel)) sub.subscribe(channel);
    if (events_.resync) events_.resync();
    return;
  }
  // The first attempt failed or the link dropped: waiters fall back to
  // waiting on the holder's lease and retrying; reconnects continue in the
  // background, and a node that stays down is replaced (rehome).
  const Status why = sub.down() ? *sub.down() : Status(Errc::unavailable, "the subscription connection is down");
  for (auto& [channel, w] : watches_) {
    if (w.node != key) continue;
    w.confirmed = false;
    post_all(std::exchange(w.ready, {}), why);
  }
  if (route_->moves()) rehome_later();
}

void RedisBackend::on_subscribed(const std::string& key, const std::string& channel, const Reply* error) {
  auto it = watches_.find(channel);
  if (it == watches_.end() || it->second.node != key) return;  // unwatched, or moved meanwhile
  Watch& w = it->second;
  if (!error) {
    w.confirmed = true;
    post_all(std::exchange(w.ready, {}), {});
    // Subscribed again after a gap (its slot moved): a release published
    // in between was missed, so the waiters retry once.
    if (std::exchange(w.resync, false) && events_.resync) events_.resync();
    return;
  }
  // Sharded: a node that no longer serves the slot (a migration, or a map
  // not yet learnt) redirects; the waiters keep waiting for the node that does.
  if (route_->moves() && parse_redirect(error->str).kind != Redirect::Kind::none) return rehome_later();
  post_all(std::exchange(w.ready, {}), translate_error(error->str));
}

void RedisBackend::on_dropped(const std::string& key, const std::string& channel) {
  auto it = watches_.find(channel);
  if (it == watches_.end() || it->second.node != key) return;
  it->second.confirmed = false;
  it->second.resync = true;
  rehome_later();
}

void RedisBackend::rehome_later() {
  if (closed_ || rehome_armed_) return;
  route_->refresh();
  rehome_armed_ = true;
  resubscribe_timer_.expires_after(kRehomeGap);
  resubscribe_timer_.async_wait([this](const boost::system::error_code& ec) {
    rehome_armed_ = false;
    if (!ec && !closed_) rehome();
  });
}

void RedisBackend::rehome() {
  bool again = false;
  for (auto& [channel, w] : watches_) {
    if (w.confirmed) continue;
    const ConnectionConfig c = node_for(channel);
    if (std::string key = node_key(c); key != w.node) {
      w.node = std::move(key);
      w.resync = true;
    }
    Subscriber& sub = subscriber(w.node, c);
    if (!sub.ready()) {
      again = true;  // subscribes once up, unless it is replaced first
      continue;
    }
    if (!sub.subscribing(channel)) sub.subscribe(channel);
  }
  for (auto it = subs_.begin(); it != subs_.end();) {
    const bool needed =
        std::any_of(watches_.begin(), watches_.end(), [&](const auto& w) { return w.second.node == it->first; });
    if (needed || it->second->ready()) {
      ++it;
      continue;
    }
    // Closed, not destroyed: its handlers may still be queued.
    it->second->close();
    retired_.push_back(std::move(it->second));
    it = subs_.erase(it);
  }
  if (again) rehome_later();
}

void RedisBackend::on_message(const std::string& channel, const std::string& payload) {
  auto it = watches_.find(channel);
  if (it == watches_.end()) return;
  // A copy of the name: the handlers may unwatch.
  std::string name = it->second.name;
  // A hand-over to a line's waiter comes on its client's channel too.
  if (it->second.personal && !payload.starts_with("h:")) return on_waiter_message(name, payload);
  // A hand-over, "h:<fence>:<lease ms>:<owner>/<grant>": its recipient
  // holds the lock now (the other waiters sleep on: it is held again,
  // for up to that lease unless renewed).
  if (payload.starts_with("h:") && events_.handed) {
    const auto colon = payload.find(':', 2);
    const auto colon2 = colon == std::string::npos ? colon : payload.find(':', colon + 1);
    detail::HandOver to;
    to.name = name;
    if (colon2 != std::string::npos &&
        split_wire_owner(std::string_view(payload).substr(colon2 + 1), to.owner, to.grant)) {
      to.fence = std::strtoull(payload.c_str() + 2, nullptr, 10);
      to.lease = milliseconds(std::strtoll(payload.c_str() + colon + 1, nullptr, 10));
      events_.handed(to);
    }
    return;  // held again: nobody else could take it
  }
  if (payload == "c") {  // a free lock granted: only observers care
    if (events_.changed) events_.changed(name);
    return;
  }
  if (events_.released) events_.released({std::move(name), 0});
}

// The attempt is parsed from what this client sent (waiter_member): a
// payload that does not parse is ignored.
void RedisBackend::on_waiter_message(const std::string& name, std::string_view payload) {
  if (payload.size() < 3 || payload[1] != ':' || (payload[0] != 'w' && payload[0] != 's')) return;
  detail::WaiterTurns::Message m;
  m.turn = payload[0] == 'w';
  m.name = name;
  const char* end = payload.data() + payload.size();
  auto [p, ec] = std::from_chars(payload.data() + 2, end, m.attempt);
  if (ec != std::errc() || (m.turn && p != end) || (!m.turn && (p == end || *p != ':'))) return;
  if (!m.turn && std::from_chars(p + 1, end, m.ms).ec != std::errc()) return;
  turns_.deliver(m);
}

void RedisBackend::leave(const std::string& name, std::uint64_t attempt, std::function<void(Status)> done) {
  ScriptCall sc = leave_request(keyspace_, name, waiter_member(waiter_id_, attempt));
  eval(*sc.script, sc.keys, sc.args, [done = std::move(done)](Result<Reply> r) { done(r.status()); });
}

}  // namespace dlock::redis

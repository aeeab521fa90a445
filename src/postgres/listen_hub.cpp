#include "postgres/listen_hub.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <set>
#include <thread>

namespace dlock::postgres {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using SinkPtr = std::shared_ptr<ListenHub::Sink>;

void ListenHub::Sink::post(std::shared_ptr<Sink> self, std::function<void(Sink&)> f) {
  std::lock_guard lk(mu_);
  if (!io_) return;
  asio::post(*io_, [self = std::move(self), f = std::move(f)] {
    if (self->live_) f(*self);
  });
}

// Everything below runs on the hub's thread.
struct ListenHub::Impl {
  Impl(ListenHub& h, PgConfig config, milliseconds min, milliseconds max)
      : hub(h), conn(io, std::move(config)), backoff_min(min), backoff_max(max), backoff(min) {
    conn.on_notify([this](const std::string& chan, const std::string& payload) { deliver(chan, payload); });
    conn.on_down([this] { dropped(); });
    thread = std::thread([this] { io.run(); });
  }

  void deliver(const std::string& chan, const std::string& payload) {
    auto it = channels.find(chan);
    if (it == channels.end()) return;
    for (const SinkPtr& s : it->second) s->post(s, [chan, payload](Sink& k) { k.notify_(chan, payload); });
  }

  void tell_all(const Status& s) {
    for (const SinkPtr& k : sinks) k->post(k, [s](Sink& sink) { sink.state_(s); });
  }

  void dropped() {
    hub.reconnects_.fetch_add(1, std::memory_order_relaxed);
    tell_all(Status(Errc::unavailable, "postgres: the LISTEN connection dropped"));
    arm_retry();
  }

  // One LISTEN again for every channel after the backoff, then every
  // client told (a failed LISTEN, the first ones included, arms it too).
  void arm_retry() {
    if (retrying || closed) return;
    retrying = true;
    retry.expires_after(backoff);
    backoff = std::min(backoff * 2, backoff_max);
    retry.async_wait([this](const boost::system::error_code& ec) {
      if (!ec && !closed) relisten();
    });
  }

  void relisten() {
    if (channels.empty()) {
      retrying = false;
      backoff = backoff_min;
      return tell_all(Status());
    }
    auto left = std::make_shared<std::size_t>(channels.size());
    auto failed = std::make_shared<bool>(false);
    for (const auto& entry : channels)
      conn.query("LISTEN " + entry.first, {}, [this, left, failed](Result<Rows> r) {
        *failed = *failed || !r.ok();
        if (--*left > 0) return;
        retrying = false;
        if (closed) return;
        if (*failed) return arm_retry();
        backoff = backoff_min;
        tell_all(Status());
      });
  }

  void listen(const SinkPtr& sink, const std::string& chan, std::function<void(Status)> done) {
    channels[chan].insert(sink);
    conn.query("LISTEN " + chan, {}, [this, sink, done = std::move(done)](Result<Rows> r) mutable {
      if (!r.ok() && !closed) arm_retry();
      Status s = r.ok() ? Status() : r.status();
      sink->post(sink, [done = std::move(done), s](Sink&) { done(s); });
    });
  }

  void unlisten(const SinkPtr& sink, const std::string& chan) {
    auto it = channels.find(chan);
    if (it == channels.end() || it->second.erase(sink) == 0 || !it->second.empty()) return;
    channels.erase(it);
    conn.query("UNLISTEN " + chan, {}, [](Result<Rows>) {});
  }

  void leave(const SinkPtr& sink) {
    std::vector<std::string> mine;
    for (const auto& [chan, listeners] : channels)
      if (listeners.count(sink)) mine.push_back(chan);
    for (const std::string& chan : mine) unlisten(sink, chan);
    sinks.erase(sink);
  }

  ListenHub& hub;
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  PgConnection conn;
  asio::steady_timer retry{io};
  milliseconds backoff_min, backoff_max, backoff;
  std::set<SinkPtr> sinks;
  std::map<std::string, std::set<SinkPtr>> channels;  // the clients listening to each
  bool retrying = false;                              // a relisten armed or on its way
  bool closed = false;
  std::thread thread;  // last: starts once the rest is built
};

ListenHub::ListenHub(PgConfig config, milliseconds backoff_min, milliseconds backoff_max)
    : impl_(std::make_unique<Impl>(*this, std::move(config), backoff_min, backoff_max)) {}

ListenHub::~ListenHub() {
  asio::post(impl_->io, [impl = impl_.get()] {
    impl->closed = true;
    impl->retry.cancel();
    impl->conn.close();
  });
  impl_->work.reset();
  impl_->thread.join();
}

std::shared_ptr<ListenHub> ListenHub::of(const PgConfig& config, milliseconds backoff_min, milliseconds backoff_max) {
  // Leaked: a client may close after static destructors ran.
  static auto* mu = new std::mutex;
  static auto* hubs = new std::map<std::string, std::weak_ptr<ListenHub>>;
  std::string key =
      std::to_string(config.connect_timeout.count()) + '/' + std::to_string(config.command_timeout.count());
  for (const auto& [k, v] : config.params) key += '\0' + k + '=' + v;
  std::lock_guard lk(*mu);
  for (auto it = hubs->begin(); it != hubs->end();) it = it->second.expired() ? hubs->erase(it) : std::next(it);
  if (auto hub = (*hubs)[key].lock()) return hub;
  PgConfig own = config;
  own.log = nullptr;  // a client's logger goes with its client
  std::shared_ptr<ListenHub> hub(new ListenHub(std::move(own), backoff_min, backoff_max));
  (*hubs)[key] = hub;
  return hub;
}

SinkPtr ListenHub::join(asio::io_context& io, Sink::Notify notify, Sink::State state) {
  auto sink = std::make_shared<Sink>(io, std::move(notify), std::move(state));
  asio::post(impl_->io, [impl = impl_.get(), sink] { impl->sinks.insert(sink); });
  return sink;
}

void ListenHub::listen(const SinkPtr& sink, std::string channel, std::function<void(Status)> done) {
  asio::post(impl_->io, [impl = impl_.get(), sink, channel = std::move(channel), done = std::move(done)]() mutable {
    impl->listen(sink, channel, std::move(done));
  });
}

void ListenHub::unlisten(const SinkPtr& sink, std::string channel) {
  asio::post(impl_->io, [impl = impl_.get(), sink, channel = std::move(channel)] { impl->unlisten(sink, channel); });
}

void ListenHub::leave(const SinkPtr& sink) {
  sink->live_ = false;
  {
    std::lock_guard lk(sink->mu_);
    sink->io_ = nullptr;
  }
  asio::post(impl_->io, [impl = impl_.get(), sink] { impl->leave(sink); });
}

}  // namespace dlock::postgres

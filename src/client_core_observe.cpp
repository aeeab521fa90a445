// Observers of a lock's holder (Election::observe): a watch on the name
// (Backend::observe: every release and hand-over of it; on ZooKeeper, its queue),
// an inspect at each wake-up, and a timer for what sends no message: a
// holder's lease running out, and on some backends a free lock's first grant.
#include "client_core_internal.hpp"
#include "sync_wait.hpp"

namespace dlock::detail {

namespace {
// How often a free lock is looked at again: a grant of a free lock is not
// published by every backend.
constexpr milliseconds kFreePoll{500};
}  // namespace

struct ClientCore::Observer {
  explicit Observer(asio::io_context& io) : timer(io) {}
  std::string name;
  std::function<void(const LockInfo&)> on_change;
  asio::steady_timer timer;
  bool told = false;  // on_change ran at least once
  bool held = false;
  std::uint64_t fence = 0;
  std::string holder;
  bool inspecting = false;
  bool again = false;  // a wake-up came while inspecting
  bool stopped = false;
  // Released after the first look's answer (or with the observer): observe
  // returns then.
  std::shared_ptr<void> first_look;
};

std::uint64_t ClientCore::observe(std::string name, std::function<void(const LockInfo&)> on_change) {
  const std::uint64_t id = next_observer_.fetch_add(1);
  // The caller waits for the first report, so that every change after
  // observe() returns is told (a change while the watch was being placed
  // would otherwise pass unseen). Not on the I/O thread: it would wait for
  // itself.
  SyncWait<bool> first;
  std::shared_ptr<void> answered(nullptr, [set = first.setter()](void*) mutable { set(true); });
  post([this, id, name = std::move(name), on_change = std::move(on_change), answered]() mutable {
    if (closing_) return;
    auto obs = std::make_shared<Observer>(rt_->io);
    obs->name = std::move(name);
    obs->on_change = std::move(on_change);
    obs->first_look = std::move(answered);
    observers_[id] = obs;
    backend_->observe(obs->name, [this, obs](Status) {
      if (!closing_ && !obs->stopped) look(obs);
    });
  });
  if (!on_io_thread()) {
    answered.reset();
    (void)first.wait();
  }
  return id;
}

void ClientCore::unobserve(std::uint64_t id) {
  auto stop = [this, id] {
    auto it = observers_.find(id);
    if (it == observers_.end()) return;
    it->second->stopped = true;
    it->second->timer.cancel();
    if (!closing_) backend_->unobserve(it->second->name);
    observers_.erase(it);
  };
  if (on_io_thread()) return stop();
  SyncWait<bool> done;
  post([stop, set = done.setter()]() mutable {
    stop();
    set(true);
  });
  (void)done.wait();
}

void ClientCore::observers_of(const std::string& name) {
  for (auto& [id, obs] : observers_)
    if (obs->name == name) look(obs);
}

void ClientCore::look(const std::shared_ptr<Observer>& obs) {
  if (obs->inspecting) {
    obs->again = true;
    return;
  }
  obs->inspecting = true;
  backend_->inspect(obs->name, [this, obs](Result<LockInfo> r) {
    const auto answered = std::move(obs->first_look);  // let observe() return after on_change
    obs->inspecting = false;
    if (closing_ || obs->stopped) return;
    milliseconds next = kFreePoll;
    if (r.ok()) {
      const LockInfo& info = *r;
      if (!obs->told || info.held != obs->held || info.fence != obs->fence || info.holder != obs->holder) {
        obs->told = true;
        obs->held = info.held;
        obs->fence = info.fence;
        obs->holder = info.holder;
        obs->on_change(info);
        if (obs->stopped || closing_) return;  // unobserved from inside the callback
      }
      // A lease that runs out sends nothing: look again just after it.
      if (info.held) next = info.remaining.count() > 0 ? info.remaining + milliseconds(5) : milliseconds::max();
    }
    if (std::exchange(obs->again, false)) return look(obs);
    obs->timer.cancel();
    if (next == milliseconds::max()) return;  // a session holds it: its end is published
    obs->timer.expires_after(next);
    obs->timer.async_wait([this, obs](const error_code& ec) {
      if (!ec && !closing_ && !obs->stopped) look(obs);
    });
  });
}

}  // namespace dlock::detail

#include "strategies_zk.hpp"

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace torture {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

void quiet(const char*) {}

class ZkHerd final : public Strategy {
 public:
  explicit ZkHerd(const StrategyConfig& c) : config_(c) {
    std::string hosts;
    for (auto p : c.ports) hosts += (hosts.empty() ? "" : ",") + c.host + ":" + std::to_string(p);
    zh_ = zookeeper_init2(hosts.c_str(), &ZkHerd::on_event, static_cast<int>(c.ttl_ms), nullptr, this, 0, &quiet);
    if (!zh_) throw std::runtime_error("zookeeper_init failed");
    const auto end = Clock::now() + milliseconds(10000);
    while (zoo_state(zh_) != ZOO_CONNECTED_STATE && Clock::now() < end) std::this_thread::sleep_for(milliseconds(5));
    for (const char* p : {"/herd", "/herd/torture"}) zoo_create(zh_, p, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
  }
  ~ZkHerd() override { zookeeper_close(zh_); }

  AcquireResult acquire(milliseconds wait, std::function<void()>) override {
    char made[256];
    const int rc = zoo_create(zh_, "/herd/torture/lock-", "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, made,
                              sizeof made);
    if (rc != ZOK)
      return {rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ? Outcome::info : Outcome::fail, 0, zerror(rc)};
    node_ = made;
    const std::string mine = node_.substr(node_.rfind('/') + 1);
    const auto deadline = Clock::now() + wait;
    for (;;) {
      // The article: list the children with a watch; lowest holds it.
      const std::uint64_t seen = events_seen();
      String_vector v{};
      const int lr = zoo_get_children(zh_, "/herd/torture", 1, &v);
      if (lr != ZOK) return give_up(Outcome::info, zerror(lr));
      std::vector<std::string> kids(v.data, v.data + v.count);
      deallocate_String_vector(&v);
      std::sort(kids.begin(), kids.end());
      if (!kids.empty() && kids.front() == mine) return {Outcome::ok, 0, {}};
      if (std::find(kids.begin(), kids.end(), mine) == kids.end()) return give_up(Outcome::fail, "node gone");
      std::unique_lock lk(mu_);
      if (!cv_.wait_until(lk, deadline, [&] { return events_ != seen; })) {
        lk.unlock();
        return give_up(Outcome::fail, "timeout");
      }
      ++wakeups_;  // a change of the children woke this waiter
    }
  }

  ReleaseResult release() override {
    const int rc = zoo_delete(zh_, node_.c_str(), -1);
    node_.clear();
    if (rc == ZOK) return {Outcome::ok, {}};
    return {rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ? Outcome::info : Outcome::fail, zerror(rc)};
  }

  std::optional<std::uint64_t> wakeups() const override { return wakeups_; }

 private:
  AcquireResult give_up(Outcome o, const std::string& why) {
    zoo_delete(zh_, node_.c_str(), -1);
    node_.clear();
    return {o, 0, why};
  }
  std::uint64_t events_seen() {
    std::lock_guard lk(mu_);
    return events_;
  }
  // The C client's completion thread: count, wake, nothing else.
  static void on_event(zhandle_t*, int type, int, const char*, void* ctx) {
    auto* self = static_cast<ZkHerd*>(ctx);
    if (type != ZOO_CHILD_EVENT) return;
    std::lock_guard lk(self->mu_);
    ++self->events_;
    self->cv_.notify_all();
  }

  StrategyConfig config_;
  zhandle_t* zh_ = nullptr;
  std::string node_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t events_ = 0;  // guarded by mu_
  std::uint64_t wakeups_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> make_zk_herd(const StrategyConfig& config) { return std::make_unique<ZkHerd>(config); }

}  // namespace torture

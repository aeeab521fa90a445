// The two streams the etcd backend keeps open: a lease's keep-alive
// (blocking, on the backend's keep-alive thread) and the watches of its
// waiters (gRPC's callback API: adding a watch never blocks the I/O thread,
// even when the member stopped reading).
#include <deque>

#include "etcd/rpc_impl.hpp"

namespace dlock::etcd {

// ---- keep-alive ----

struct EtcdRpc::KeepAlive::State {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>> stream;
};

EtcdRpc::KeepAlive::KeepAlive(std::unique_ptr<State> s) : s_(std::move(s)) {}

EtcdRpc::KeepAlive::~KeepAlive() {
  s_->ctx.TryCancel();
  s_->stream->Finish();
}

std::unique_ptr<EtcdRpc::KeepAlive> EtcdRpc::keep_alive(Clock::time_point by) {
  auto s = std::make_unique<KeepAlive::State>();
  impl_->prepare(s->ctx, by);
  s->ctx.AddMetadata("hasleader", "true");  // a member without a leader refuses rather than answers
  s->stream = impl_->pick().lease->LeaseKeepAlive(&s->ctx);
  return std::make_unique<KeepAlive>(std::move(s));
}

Result<std::int64_t> EtcdRpc::KeepAlive::refresh(std::int64_t lease) {
  pb::LeaseKeepAliveRequest req;
  req.set_id(lease);
  pb::LeaseKeepAliveResponse resp;
  if (!s_->stream->Write(req) || !s_->stream->Read(&resp))
    return Status(Errc::unavailable, "etcd: the lease keep-alive stream broke");
  return resp.ttl();
}

void EtcdRpc::KeepAlive::cancel() { s_->ctx.TryCancel(); }

// ---- watches ----

// One bidirectional stream. Writes go out one at a time (gRPC allows one
// outstanding write), the rest queued; a read is always outstanding. A hold
// keeps the call from finishing (OnDone) until the owner lets go, so that
// no write can be started on a finished call: the end of the stream is
// learned from a failed read instead. No reaction runs under the mutex.
struct EtcdRpc::Watches::State final : grpc::ClientBidiReactor<pb::WatchRequest, pb::WatchResponse> {
  std::function<void(const WatchNews&)> news;
  std::function<void(Status)> ended;
  std::size_t member = 0;
  std::atomic<Clock::rep> heard{Clock::now().time_since_epoch().count()};
  grpc::ClientContext ctx;
  pb::WatchResponse resp;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<pb::WatchRequest> out;  // under mu; the front is being written
  bool writing = false;              // under mu
  bool closing = false;              // under mu: the owner let go
  bool done = false;                 // under mu: OnDone ran

  bool send(pb::WatchRequest req) {
    pb::WatchRequest* next = nullptr;
    {
      std::lock_guard lock(mu);
      if (closing) return false;
      out.push_back(std::move(req));
      if (writing) return true;
      writing = true;
      next = &out.front();  // stays put until its write is done
    }
    StartWrite(next);
    return true;
  }
  void OnWriteDone(bool ok) override {
    pb::WatchRequest* next = nullptr;
    {
      std::lock_guard lock(mu);
      out.pop_front();
      if (!ok || out.empty()) {
        writing = false;  // a failed write: the stream is ending (a read fails too)
        if (!ok) out.clear();
        return;
      }
      next = &out.front();
    }
    StartWrite(next);
  }
  void OnReadDone(bool ok) override {
    if (!ok) return ended(Status(Errc::unavailable, "etcd: the watch stream ended"));
    heard.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    WatchNews n;
    n.watch_id = resp.watch_id();
    n.created = resp.created();
    n.canceled = resp.canceled();
    n.compact_revision = resp.compact_revision();
    n.revision = resp.header().revision();
    n.reason = resp.cancel_reason();
    n.changed = resp.events_size() > 0;
    // etcd names no watch in a progress answer (nor in a refused create,
    // which is created and canceled at once).
    n.progress = n.watch_id == -1 && !n.created && !n.canceled && !n.changed;
    news(n);
    StartRead(&resp);
  }
  void OnDone(const grpc::Status&) override {
    std::lock_guard lock(mu);
    done = true;
    cv.notify_all();
  }
};

EtcdRpc::Watches::Watches(std::shared_ptr<State> s) : s_(std::move(s)) {}

EtcdRpc::Watches::~Watches() {
  {
    std::lock_guard lock(s_->mu);
    s_->closing = true;
  }
  s_->ctx.TryCancel();
  s_->RemoveHold();
  std::unique_lock lock(s_->mu);
  s_->cv.wait(lock, [&] { return s_->done; });
}

std::unique_ptr<EtcdRpc::Watches> EtcdRpc::watches(std::function<void(const WatchNews&)> news,
                                                   std::function<void(Status)> ended,
                                                   std::optional<std::size_t> avoid) {
  auto s = std::make_shared<Watches::State>();
  s->news = std::move(news);
  s->ended = std::move(ended);
  impl_->prepare_stream(s->ctx);
  Impl::Member& m = impl_->pick(avoid);
  s->member = impl_->index_of(m);
  m.watch->async()->Watch(&s->ctx, s.get());
  s->AddHold();
  s->StartRead(&s->resp);
  s->StartCall();
  return std::make_unique<Watches>(std::move(s));
}

bool EtcdRpc::Watches::add(std::int64_t watch_id, const std::string& key, const std::string& range_end,
                           std::int64_t from_revision, bool deletes_only) {
  pb::WatchRequest req;
  auto* c = req.mutable_create_request();
  c->set_key(key);
  if (!range_end.empty()) c->set_range_end(range_end);
  c->set_start_revision(from_revision);
  c->set_watch_id(watch_id);
  if (deletes_only) c->add_filters(pb::WatchCreateRequest::NOPUT);
  return s_->send(std::move(req));
}

bool EtcdRpc::Watches::remove(std::int64_t watch_id) {
  pb::WatchRequest req;
  req.mutable_cancel_request()->set_watch_id(watch_id);
  return s_->send(std::move(req));
}

bool EtcdRpc::Watches::probe() {
  pb::WatchRequest req;
  req.mutable_progress_request();
  return s_->send(std::move(req));
}

Clock::time_point EtcdRpc::Watches::last_heard() const {
  return Clock::time_point(Clock::duration(s_->heard.load(std::memory_order_relaxed)));
}

std::size_t EtcdRpc::Watches::member() const { return s_->member; }

void EtcdRpc::Watches::cancel() { s_->ctx.TryCancel(); }

}  // namespace dlock::etcd

#include "zookeeper/zk_session.hpp"

#include <zookeeper/zookeeper.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>

namespace dlock::zookeeper {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// Shared by the session and every handle it made: the C client's threads
// post through it, and close() cuts it once nothing can post any more.
struct ZkSession::Bridge {
  std::mutex mu;
  asio::io_context* io = nullptr;  // guarded by mu; null once closed
  ZkSession* session = nullptr;
  int in_flight = 0;  // guarded by mu: requests the C client has yet to complete
  std::condition_variable answered;

  void one_answered() {
    std::lock_guard lk(mu);
    if (--in_flight == 0) answered.notify_all();
  }
};

struct ZkSession::Handle {
  zhandle_t* zh = nullptr;
  struct Ctx {
    std::shared_ptr<Bridge> bridge;
    std::uint64_t generation = 0;
  }* ctx = nullptr;  // the watcher's context: lives until zookeeper_close() returns
};

namespace {

struct Pending {
  std::shared_ptr<ZkSession::Bridge> bridge;
  std::uint64_t generation = 0;
  ReplyFn done;
  Clock::time_point sent_at;
  bool direct = false;  // ZkSession::Delivery::direct
};

void drop_log(const char*) {}  // the backend reports what matters itself

NodeStat stat_of(const Stat* s) {
  NodeStat out;
  if (s) {
    out.czxid = s->czxid;
    out.pzxid = s->pzxid;
    out.ephemeral_owner = s->ephemeralOwner;
  }
  return out;
}

}  // namespace

// On the C client's completion thread: copy, post, nothing else.
struct ZkCallbacks {
  static void post(const void* data, Reply reply) {
    std::unique_ptr<Pending> p(static_cast<Pending*>(const_cast<void*>(data)));
    struct Counted {
      std::shared_ptr<ZkSession::Bridge> bridge;
      ~Counted() { bridge->one_answered(); }
    } counted{p->bridge};  // once delivered
    reply.sent_at = p->sent_at;
    if (p->direct) return p->done(std::move(reply));
    auto& bridge = *p->bridge;
    std::lock_guard lk(bridge.mu);
    if (!bridge.io) return;
    asio::post(*bridge.io, [s = bridge.session, gen = p->generation, done = std::move(p->done),
                            reply = std::move(reply)]() mutable { s->deliver(gen, done, reply); });
  }
  static void string_stat(int rc, const char* value, const Stat* stat, const void* data) {
    Reply r;
    r.rc = rc;
    if (rc == ZOK && value) r.path = value;
    r.stat = stat_of(rc == ZOK ? stat : nullptr);
    post(data, std::move(r));
  }
  static void stat(int rc, const Stat* stat, const void* data) {
    Reply r;
    r.rc = rc;
    r.stat = stat_of(rc == ZOK ? stat : nullptr);
    post(data, std::move(r));
  }
  static void data(int rc, const char* value, int len, const Stat* stat, const void* data) {
    Reply r;
    r.rc = rc;
    if (rc == ZOK && value && len > 0) r.data.assign(value, static_cast<std::size_t>(len));
    r.stat = stat_of(rc == ZOK ? stat : nullptr);
    post(data, std::move(r));
  }
  static void void_done(int rc, const void* data) {
    Reply r;
    r.rc = rc;
    post(data, std::move(r));
  }
  static void string_done(int rc, const char*, const void* data) {
    Reply r;
    r.rc = rc;
    post(data, std::move(r));
  }
  static void strings_stat(int rc, const String_vector* strings, const Stat* stat, const void* data) {
    Reply r;
    r.rc = rc;
    if (rc == ZOK && strings)
      for (int i = 0; i < strings->count; ++i) r.children.emplace_back(strings->data[i]);
    r.stat = stat_of(rc == ZOK ? stat : nullptr);
    post(data, std::move(r));
  }
  static void watcher(zhandle_t* zh, int type, int state, const char* path, void* context) {
    auto* ctx = static_cast<ZkSession::Handle::Ctx*>(context);
    std::int64_t session = 0;
    int timeout = 0;
    if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) {
      if (const clientid_t* id = zoo_client_id(zh)) session = id->client_id;
      timeout = zoo_recv_timeout(zh);
    }
    auto& bridge = *ctx->bridge;
    std::lock_guard lk(bridge.mu);
    if (!bridge.io) return;
    asio::post(*bridge.io, [s = bridge.session, gen = ctx->generation, type, state, session, timeout,
                            p = std::string(path ? path : "")] { s->on_watch(gen, type, state, p, session, timeout); });
  }
};

ZkSession::ZkSession(asio::io_context& io, const ZkConfig& config, Handlers handlers)
    : io_(io), config_(config), handlers_(std::move(handlers)), bridge_(std::make_shared<Bridge>()) {
  bridge_->io = &io_;
  bridge_->session = this;
}

ZkSession::~ZkSession() { close(); }

Status ZkSession::open() {
  std::unique_ptr<Handle> previous;
  {
    std::lock_guard lk(mu_);
    previous = std::move(current_);
  }
  std::erase_if(closers_, [](Closer& c) {
    if (!c.done->load()) return false;
    c.thread.join();
    return true;
  });
  if (previous) {
    Handle* old = previous.release();
    auto done = std::make_shared<std::atomic<bool>>(false);
    closers_.push_back({std::thread([old, done] {
                          zookeeper_close(old->zh);
                          delete old->ctx;
                          delete old;
                          done->store(true);
                        }),
                        done});
  }
  auto h = std::make_unique<Handle>();
  h->ctx = new Handle::Ctx{bridge_, ++generation_};
  errno = 0;
  h->zh = zookeeper_init2(config_.hosts.c_str(), &ZkCallbacks::watcher,
                          static_cast<int>(config_.session_timeout.count()), nullptr, h->ctx, 0, &drop_log);
  if (!h->zh) {
    const int err = errno;
    delete h->ctx;
    return {Errc::invalid_argument, "ZooKeeper client refused the hosts '" + config_.hosts +
                                        "': " + (err ? std::strerror(err) : "unknown error")};
  }
  std::lock_guard lk(mu_);
  current_ = std::move(h);
  return {};
}

void ZkSession::close() {
  {
    // The requests out are answered first (bounded): a session closed with
    // answers unread resets the connection, and the server may drop the
    // close with the rest of what it had not read yet. The session then
    // lives on to its timeout, and with it a queue node just made: a lock
    // held by a client that is gone.
    std::unique_lock lk(bridge_->mu);
    bridge_->answered.wait_for(lk, kDrainAtClose, [&] { return bridge_->in_flight <= 0; });
  }
  for (auto& c : closers_) c.thread.join();
  closers_.clear();
  std::unique_ptr<Handle> last;
  {
    std::lock_guard lk(mu_);
    last = std::move(current_);
  }
  if (last) {
    zookeeper_close(last->zh);  // runs pending completions (ZCLOSING), which still post
    delete last->ctx;
  }
  std::lock_guard lk(bridge_->mu);
  bridge_->io = nullptr;
}

void ZkSession::deliver(std::uint64_t generation, ReplyFn& done, Reply& reply) {
  if (generation != generation_ && reply.rc != ZCLOSING) reply.rc = ZSESSIONEXPIRED;
  done(std::move(reply));
}

void ZkSession::on_watch(std::uint64_t generation, int type, int state, const std::string& path, std::int64_t session,
                         int timeout_ms) {
  if (generation != generation_) return;
  if (type == ZOO_SESSION_EVENT) {
    if (handlers_.state) handlers_.state({state, session, std::chrono::milliseconds(timeout_ms)});
  } else if (handlers_.node) {
    handlers_.node(type, path);
  }
}

// `call` sends with the handle and a Pending it hands to the C client; when
// the client refuses at once, no completion will come: the reply is posted.
template <class Call>
void ZkSession::submit(ReplyFn done, Delivery via, Call call, bool counted) {
  if (counted) calls_.fetch_add(1, std::memory_order_relaxed);
  auto* p = new Pending{bridge_, generation_.load(), std::move(done), Clock::now(), via == Delivery::direct};
  {
    std::lock_guard lk(bridge_->mu);
    ++bridge_->in_flight;
  }
  int rc = ZINVALIDSTATE;
  {
    std::lock_guard lk(mu_);
    if (current_) rc = call(current_->zh, p);
  }
  if (rc == ZOK) return;  // the completion owns p now
  bridge_->one_answered();
  std::unique_ptr<Pending> own(p);
  Reply r;
  r.rc = rc;
  r.sent_at = own->sent_at;
  if (own->direct) return own->done(std::move(r));
  asio::post(io_, [this, gen = own->generation, done = std::move(own->done), r]() mutable { deliver(gen, done, r); });
}

void ZkSession::create(const std::string& path, const std::string& data, int flags, bool creator_acl, ReplyFn done,
                       Delivery via) {
  submit(std::move(done), via, [&](zhandle_t* zh, Pending* p) {
    return zoo_acreate2(zh, path.c_str(), data.data(), static_cast<int>(data.size()),
                        creator_acl ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE, flags, &ZkCallbacks::string_stat, p);
  });
}

void ZkSession::remove(const std::string& path, ReplyFn done, Delivery via) {
  submit(std::move(done), via,
         [&](zhandle_t* zh, Pending* p) { return zoo_adelete(zh, path.c_str(), -1, &ZkCallbacks::void_done, p); });
}

void ZkSession::exists(const std::string& path, bool watch, ReplyFn done) {
  submit(std::move(done), Delivery::loop, [&](zhandle_t* zh, Pending* p) {
    return zoo_aexists(zh, path.c_str(), watch ? 1 : 0, &ZkCallbacks::stat, p);
  });
}

void ZkSession::get(const std::string& path, bool watch, ReplyFn done) {
  submit(std::move(done), Delivery::loop,
         [&](zhandle_t* zh, Pending* p) { return zoo_aget(zh, path.c_str(), watch ? 1 : 0, &ZkCallbacks::data, p); });
}

void ZkSession::children(const std::string& path, ReplyFn done, Delivery via, bool watch) {
  submit(std::move(done), via, [&](zhandle_t* zh, Pending* p) {
    return zoo_aget_children2(zh, path.c_str(), watch ? 1 : 0, &ZkCallbacks::strings_stat, p);
  });
}

void ZkSession::sync(const std::string& path, ReplyFn done) {
  submit(
      std::move(done), Delivery::loop,
      [&](zhandle_t* zh, Pending* p) { return zoo_async(zh, path.c_str(), &ZkCallbacks::string_done, p); }, false);
}

// No completion: the C client may drop an auth completion at close without
// calling it. It sends the credentials before any request queued after
// them, on every (re)connect; digest credentials are not checked at login
// (a wrong password shows later as ZNOAUTH on nodes it may not touch).
Status ZkSession::add_digest_auth(const std::string& user, const std::string& password) {
  std::lock_guard lk(mu_);
  if (!current_) return rc_status(ZINVALIDSTATE, "add_auth");
  const std::string cert = user + ":" + password;
  const int rc = zoo_add_auth(current_->zh, "digest", cert.data(), static_cast<int>(cert.size()), nullptr, nullptr);
  return rc_status(rc, "add_auth");
}

std::string rc_name(int rc) {
  switch (rc) {
    case ZOK:
      return "ZOK";
    case ZCONNECTIONLOSS:
      return "ZCONNECTIONLOSS";
    case ZOPERATIONTIMEOUT:
      return "ZOPERATIONTIMEOUT";
    case ZINVALIDSTATE:
      return "ZINVALIDSTATE";
    case ZNONODE:
      return "ZNONODE";
    case ZNOAUTH:
      return "ZNOAUTH";
    case ZNODEEXISTS:
      return "ZNODEEXISTS";
    case ZNOTEMPTY:
      return "ZNOTEMPTY";
    case ZSESSIONEXPIRED:
      return "ZSESSIONEXPIRED";
    case ZAUTHFAILED:
      return "ZAUTHFAILED";
    case ZCLOSING:
      return "ZCLOSING";
    case ZBADARGUMENTS:
      return "ZBADARGUMENTS";
    case ZNOCHILDRENFOREPHEMERALS:
      return "ZNOCHILDRENFOREPHEMERALS";
    default:
      return "Z" + std::to_string(rc);
  }
}

Status rc_status(int rc, std::string_view what, Errc unknown_as) {
  std::string msg = "zookeeper: " + std::string(what) + ": " + zerror(rc);
  switch (rc) {
    case ZOK:
      return {};
    case ZCONNECTIONLOSS:
    case ZOPERATIONTIMEOUT:
      return {unknown_as, std::move(msg), rc_name(rc)};
    case ZSESSIONEXPIRED:
    case ZINVALIDSTATE:
    case ZCLOSING:
      return {Errc::unavailable, std::move(msg) + " (the session ended; a new one is opened)", rc_name(rc)};
    case ZNOAUTH:
      return {Errc::permission_denied, std::move(msg), rc_name(rc)};
    case ZAUTHFAILED:
      return {Errc::auth_failed, std::move(msg), rc_name(rc)};
    default:
      return {Errc::server_error, std::move(msg), rc_name(rc)};
  }
}

}  // namespace dlock::zookeeper

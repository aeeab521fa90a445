// The lock, per acquire() (etcd's Mutex, in dlock's terms):
//   1. one transaction puts <prefix><name>/<lease in hex> under the
//      client's lease unless it is there (a put whose answer was lost is
//      found again by its name: a repeat never makes a second key), and
//      reads the key and the whole line, oldest first;
//   2. the oldest key of the line holds: granted, with the key's create
//      revision as the fence;
//   3. otherwise it watches the deletion of the key just before its own
//      (no herd: one release wakes one waiter) and of its own key (an
//      operator's delete, the lease's end), from the revision it read, so
//      nothing between the read and the watch is missed, and answers busy.
// A key's value is what its holder says of itself (its description, an
// election's candidate id), as etcd's Election keeps its proposal there:
// etcdctl elect -l shows a dlock leader's id, and dlock shows etcdctl's.
// Readers and permits are dlock's own (etcd has no such recipe in its
// client): their keys end in "-read" or "-sem<N>" and the line follows
// core/queue_line.hpp, as ZooKeeper's does. A key with no such ending
// (etcd's Mutex, etcdctl lock) is exclusive, so a reader and etcdctl
// exclude each other as a reader and a writer do.
// A release deletes the key if it is still the one granted (its create
// revision compared), so a delayed release never removes a later key. An
// acquire that ends without a grant deletes its key. A delete that fails
// is retried until it is done or the lease ends (the key goes with it).
//
// How the lease vouches for the holds: etcd_liveness.cpp.
#include "etcd/etcd_backend.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "core/queue_line.hpp"
#include "etcd/etcd_lock.hpp"

namespace dlock::etcd {
namespace {

// A line key's last segment: a lease in hex, with dlock's "_<attempt>"
// when one client waits twice on a name, and "-<kind>" for a shared one.
bool waiter_segment(std::string_view s) {
  const std::string_view id = s.substr(0, s.find('-'));
  return !id.empty() && id.find_first_not_of("0123456789abcdef_") == std::string_view::npos;
}

constexpr milliseconds kPollWithoutWatch{200};  // a waiter's look, while the watch stream is down

}  // namespace

// The line's entries: the keys right under it (a lock "a/b" lives under
// "a/" too, and is another lock), oldest first.
std::vector<detail::QueueNode> entries_of(const std::vector<KeyValue>& keys, const std::string& prefix) {
  std::vector<detail::QueueNode> line;
  for (const KeyValue& kv : keys) {
    if (kv.key.find('/', prefix.size()) != std::string::npos) continue;
    detail::QueueNode n;
    n.name = kv.key;
    n.seq = kv.create_revision;
    if (const auto dash = kv.key.find('-', prefix.size()); dash != std::string::npos)
      detail::read_kind_word(std::string_view(kv.key).substr(dash + 1), n);
    line.push_back(std::move(n));
  }
  return line;
}

const KeyValue* created_at(const std::vector<KeyValue>& kvs, const std::string& key, std::int64_t create_revision) {
  const auto it = std::find_if(kvs.begin(), kvs.end(), [&](const KeyValue& kv) {
    return kv.key == key && kv.create_revision == create_revision;
  });
  return it == kvs.end() ? nullptr : &*it;
}

// A write with no answer may have been made: the next attempt finds its key
// by name, so for the acquire it is a retry.
Status attempt_failed(Status s) {
  if (s.code() != Errc::outcome_unknown) return s;
  return {Errc::unavailable, s.message() + "; the next attempt finds the key by its name"};
}

std::string lease_hex(std::int64_t lease) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(lease));
  return buf;
}

EtcdBackend::EtcdBackend(asio::io_context& io, EtcdBackendConfig config)
    : io_(io),
      config_(std::move(config)),
      deadline_(io),
      lease_retry_(io),
      watch_retry_(io),
      orphan_retry_(io),
      hold_watch_timer_(io),
      probe_timer_(io) {}

EtcdBackend::~EtcdBackend() {
  if (!closed_) close();
}

detail::Capabilities EtcdBackend::capabilities() const {
  detail::Capabilities c;
  c.needs_renewal = false;  // the lease's keep-alives keep the keys
  c.server_reentry = false;
  c.lines = true;        // readers and permits in the same line
  c.always_fair = true;  // the line is granted in create order
  return c;
}

void EtcdBackend::log(LogLevel level, const std::string& message) const {
  if (config_.log) config_.log(level, message);
}

void EtcdBackend::start(StatusDone done) {
  start_done_ = std::move(done);
  EtcdConfig cluster = config_.cluster;
  cluster.log = config_.log;
  auto rpc = EtcdRpc::connect(std::move(cluster), Clock::now() + config_.connect_timeout);
  if (!rpc.ok())
    return finish_start(Status(rpc.status().code(), rpc.status().message() + " (" + config_.describe + ")"));
  rpc_ = std::move(*rpc);
  {
    std::lock_guard lk(fast_mu_);
    fast_closed_ = false;  // callers' calls wait for a lease (lease_now_)
  }
  keeper_ = std::make_unique<LeaseKeeper>(
      *rpc_,
      LeaseKeeper::Handlers{[this](std::int64_t lease, Clock::time_point at, std::int64_t ttl) {
                              loop([this, lease, at, ttl] { on_kept(lease, at, ttl); });
                            },
                            [this](std::int64_t, const Status& why) {
                              loop([this, why] { log(LogLevel::debug, "etcd: keep-alive: " + why.to_string()); });
                            }});
  open_watches();
  ask_lease();
}

void EtcdBackend::close() {
  closed_ = true;
  close_fast();  // before rpc_ goes
  deadline_.cancel();
  lease_retry_.cancel();
  watch_retry_.cancel();
  orphan_retry_.cancel();
  hold_watch_timer_.cancel();
  probe_timer_.cancel();
  if (start_done_) finish_start(cancelled());
  if (keeper_) keeper_->stop();
  watches_.reset();  // waits for the stream's end
  // The lease goes now, and every key of this client with it.
  if (rpc_ && lease_ != 0)
    (void)rpc_->lease_revoke(lease_,
                             Clock::now() + std::min<milliseconds>(config_.command_timeout, milliseconds(1000)));
  rpc_.reset();  // cancels the calls still out; their answers come as cancelled
}

// <lease> as etcd's Mutex names its key; "_<attempt>" when this client
// already has that key; "-read" or "-sem<N>" for a shared one.
std::string EtcdBackend::key_for(const AcquireCall& call) const {
  std::string key = line_of(call.name) + lease_hex(lease_);
  if (name_in_use(key)) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "_%llx", static_cast<unsigned long long>(call.attempt));
    key += buf;
  }
  if (call.mode == detail::LockMode::shared) key += "-" + detail::kind_word(call.mode, call.permits);
  return key;
}

std::string EtcdBackend::unique_key(const Attempt& a, std::uint64_t id, const char* mark) const {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%s%llx", mark, static_cast<unsigned long long>(id));
  std::string key = line_of(a.name) + lease_hex(a.lease) + buf;
  if (a.mode == detail::LockMode::shared) key += "-" + detail::kind_word(a.mode, a.permits);
  return key;
}

// By prefix: "<lease>" is taken while "<lease>-read" or "<lease>_<n>" is.
bool EtcdBackend::name_in_use(const std::string& key) const {
  for (const auto& [id, a] : attempts_)
    if (a.key.starts_with(key)) return true;
  for (const auto& [grant, h] : held_)
    if (h.key.starts_with(key)) return true;
  for (const auto& [guarded, watch] : guarded_)
    if (guarded.starts_with(key)) return true;
  for (const Orphan& o : orphans_)
    if (o.key.starts_with(key)) return true;
  const auto pending = deleting_.lower_bound(key);
  return pending != deleting_.end() && pending->starts_with(key);
}

void EtcdBackend::drop_watches(Attempt& a) {
  for (auto& w : a.watches) drop_watch(w);
  a.watches.clear();
}

void EtcdBackend::acquire(const AcquireCall& call, AcquireDone done) {
  const bool shared = call.mode == detail::LockMode::shared;
  for (const auto& [grant, h] : held_)
    if (h.name == call.name && h.owner == call.owner && h.shared != shared && !h.releasing)
      return post(std::move(done), detail::upgrade_refused(call));
  if (lease_ == 0)
    return post(std::move(done), Status(Errc::unavailable, "etcd: no lease yet (one is being asked for)"));
  auto [it, fresh] = attempts_.try_emplace(call.attempt);
  Attempt& a = it->second;
  if (fresh) {
    a.name = call.name;
    a.owner = call.owner;
    a.info = call.info;
    a.lease = lease_;
    a.mode = call.mode;
    a.permits = shared ? call.permits : 0;
    a.key = key_for(call);
  }
  a.grant = call.grant;
  if (a.line) {  // the fast path's answer, busy: the wait starts from its line
    loop([this, id = call.attempt, done = std::move(done), line = std::exchange(a.line, std::nullopt)]() mutable {
      on_line(id, std::move(done), std::move(*line));
    });
    return;
  }
  const auto deadline = std::min({by(), call.deadline, Clock::now() + kAttemptPatience});
  if (a.in_line) return look_again(call.attempt, a, deadline, std::move(done));
  a.sent = true;
  ++a.puts;
  ++calls_;
  rpc_->join_line(a.key, a.info, a.lease, line_of(a.name), deadline,
                  [this, id = call.attempt, done = std::move(done)](Result<EtcdRpc::Line> line) mutable {
                    asio::post(io_, [this, id, done = std::move(done), line = std::move(line)]() mutable {
                      on_line(id, std::move(done), std::move(line));
                    });
                  });
}

void EtcdBackend::on_line(std::uint64_t id, AcquireDone done, Result<EtcdRpc::Line> line) {
  if (closed_) return done(cancelled());
  auto it = attempts_.find(id);
  if (it == attempts_.end()) return done(lease_ended_meanwhile());
  Attempt& a = it->second;
  if (!line.ok() && line.status().code() == Errc::not_held && a.lease == lease_) {
    // The put was refused for its lease: applied through the leader, that
    // is the truth (a keep-alive's answer may not be).
    lease_ended(LossReason::expired, "a put under this client's etcd lease was refused: the lease is gone");
    return done(lease_ended_meanwhile());
  }
  if (!line.ok()) return done(attempt_failed(line.status()));
  // A key this attempt did not put (its first put found it there, or it is
  // another lease's): never adopted. This client's own leftover is deleted
  // (at its revision); either way the attempt takes a name of its own.
  if (line->mine.lease != a.lease || (!line->created && a.puts == 1)) {
    if (a.renamed) return done(Status(Errc::server_error, "etcd: the key " + a.key + " was there before its put"));
    if (line->mine.lease == a.lease) remove_key({a.key, line->mine.create_revision, false}, [](Status) {});
    a.key = unique_key(a, id);
    a.renamed = true;
    a.sent = false;
    a.puts = 0;
    return done(AcquireOutcome::busy_with(detail::WaitHint::retry(milliseconds(0))));
  }
  a.revision = line->mine.create_revision;
  take_place(id, std::move(done), *line);
}

// Its key is in the line (the write that put it was answered): what the
// wake-up changed needs only a read, as etcd's Mutex reads after its wait,
// not a transaction the leader commits to its log. Its key gone (an
// operator, the lease's end): the next attempt puts it again.
void EtcdBackend::look_again(std::uint64_t id, Attempt& a, Clock::time_point deadline, AcquireDone done) {
  ++calls_;
  auto looked = [this, id, done = std::move(done)](Result<EtcdRpc::Range> r) mutable {
    if (closed_) return done(cancelled());
    auto it = attempts_.find(id);
    if (it == attempts_.end()) return done(lease_ended_meanwhile());
    if (!r.ok()) return done(r.status());
    Attempt& w = it->second;
    const KeyValue* mine = created_at(r->kvs, w.key, w.revision);
    if (mine == nullptr || mine->lease != w.lease) {
      w.in_line = false;
      drop_watches(w);
      return done(AcquireOutcome::busy_with(detail::WaitHint::retry(milliseconds(0))));
    }
    EtcdRpc::Line line;
    line.revision = r->revision;
    line.mine = *mine;
    line.keys = std::move(r->kvs);
    take_place(id, std::move(done), line);
  };
  rpc_->read_line(line_of(a.name), true, deadline,
                  [this, looked = std::move(looked)](Result<EtcdRpc::Range> r) mutable {
                    asio::post(io_, [looked = std::move(looked), r = std::move(r)]() mutable { looked(std::move(r)); });
                  });
}

void EtcdBackend::take_place(std::uint64_t id, AcquireDone done, const EtcdRpc::Line& line) {
  Attempt& a = attempts_.at(id);
  const std::string prefix = line_of(a.name);
  const auto entries = entries_of(line.keys, prefix);
  const detail::Standing st = detail::standing_of(entries, a.key);
  if (!st.present)
    return done(AcquireOutcome::busy_with(detail::WaitHint::retry(milliseconds(0))));  // gone meanwhile: look again
  drop_watches(a);
  a.in_line = true;
  // The key stays until the acquire ends: its abandon removes it.
  if (st.disagrees) return done(detail::disagreeing(a.name, a.permits, *st.disagrees));
  if (st.granted) return grant(id, std::move(done));
  a.watched.clear();
  a.watch_line = st.watch_children;
  if (st.watch_children) {
    // Any of the entries ahead may let it in: a deletion in the line wakes
    // it, and the check looks at every one of them.
    for (const detail::QueueNode& n : entries) {
      if (n.name == a.key) break;
      a.watched.emplace_back(n.name, n.seq);
    }
  } else {
    for (const std::string& key : st.watch)
      for (const detail::QueueNode& n : entries)
        if (n.name == key) a.watched.emplace_back(key, n.seq);
    a.watched.emplace_back(a.key, a.revision);
  }
  if (!arm_watches(id, a, false)) return done(AcquireOutcome::busy_with(detail::WaitHint::retry(kPollWithoutWatch)));
  done(AcquireOutcome::busy_with(detail::WaitHint::watched()));
}

// Watched from now on, not from the revision read: etcd serves a watch
// from a past revision only on its next catch-up pass, every 100 ms. What
// changed in between is found once the watches are in place. `ahead_only`:
// the keys ahead once more, beside the watches already made.
bool EtcdBackend::arm_watches(std::uint64_t id, Attempt& a, bool ahead_only) {
  const std::size_t before = a.watches.size();
  if (a.watch_line) {
    const std::string prefix = line_of(a.name);
    a.watches.push_back(watch_key(prefix, 0, {WatchFor::Kind::attempt, id, {}}, prefix_end(prefix), true));
  } else {
    for (const auto& [key, created] : a.watched)
      if (!ahead_only || key != a.key) a.watches.push_back(watch_key(key, 0, {WatchFor::Kind::attempt, id, key}));
  }
  if (!ahead_only) {
    ++a.armed;
    a.started_at = 0;
    a.unconfirmed = a.watches.size() - before;
  }
  return std::none_of(a.watches.begin(), a.watches.end(), [](std::int64_t w) { return w == 0; });
}

// Once every watch is in place, a read of the line finds what changed
// before they were. It also tells whether etcd took the watches of the
// keys ahead (those a release wakes it by) as caught up: a watch "from
// now" starts after the revision the server read as it came, and a write
// applied before the server registered it makes it one to catch up, whose
// news waits for the next pass (up to 100 ms). With no write since the
// earliest of them started (the read's revision is theirs), none was; with
// one, each of those keys gets a second watch, made later: both to catch
// up is rare (a first one caught up tells the change, if any, made before
// the second). Its own key's watch only tells a loss, which may wait.
void EtcdBackend::confirm_watch(std::uint64_t id, const std::string& watched_key, std::int64_t started_at) {
  auto it = attempts_.find(id);
  if (it == attempts_.end() || it->second.unconfirmed == 0) return;
  Attempt& a = it->second;
  if (watched_key != a.key) a.started_at = a.started_at == 0 ? started_at : std::min(a.started_at, started_at);
  if (--a.unconfirmed > 0) return;
  ++calls_;
  rpc_->read_line(line_of(a.name), true, by(), [this, id, armed = a.armed](Result<EtcdRpc::Range> r) {
    loop([this, id, armed, r = std::move(r)] {
      auto found = attempts_.find(id);
      if (found == attempts_.end() || found->second.armed != armed || found->second.watches.empty()) return;
      Attempt& waiter = found->second;
      const std::int64_t started = waiter.started_at;
      bool changed = !r.ok();
      for (const auto& [key, created] : waiter.watched) changed = changed || !created_at(r->kvs, key, created);
      if (changed) return wake(id);
      if (started != 0 && r->revision > started) arm_watches(id, waiter, true);
    });
  });
}

void EtcdBackend::wake(std::uint64_t id) {
  auto a = attempts_.find(id);
  if (a == attempts_.end()) return;
  drop_watches(a->second);
  if (events_.released) events_.released({a->second.name, id});
}

void EtcdBackend::grant(std::uint64_t id, AcquireDone done) {
  auto it = attempts_.find(id);
  Attempt a = std::move(it->second);
  attempts_.erase(it);
  drop_watches(a);
  keep_hold(a.grant, a);
  // Valid for what the leader's last keep-alive answer vouches for.
  done(AcquireOutcome::granted_now(static_cast<std::uint64_t>(a.revision), until_));
}

void EtcdBackend::keep_hold(std::uint64_t grant, const Attempt& a) {
  Held h{a.key, a.name, a.owner, a.lease, a.revision};
  h.shared = a.mode == detail::LockMode::shared;
  held_[grant] = std::move(h);
  watch_hold_soon(grant);  // its key's deletion (an operator, the lease's end) is its loss
  arm_deadline();
}

void EtcdBackend::release(const ReleaseCall& call, std::function<void(Result<ReleaseOutcome>)> done) {
  auto it = held_.find(call.grant);
  if (it == held_.end()) return post(std::move(done), ReleaseOutcome{ReleaseOutcome::Kind::not_held, 0});
  Held& h = it->second;
  h.releasing = true;
  drop_watch(h.watch);
  ++calls_;
  rpc_->erase_created(
      h.key, h.revision, by(), [this, grant = call.grant, done = std::move(done)](Result<EtcdRpc::Erased> r) {
        asio::post(io_, [this, grant, done = std::move(done), r = std::move(r)]() mutable {
          if (closed_) return done(cancelled());
          auto found = held_.find(grant);
          if (found == held_.end()) return done(ReleaseOutcome{ReleaseOutcome::Kind::not_held, 0});  // its lease ended
          if (r.ok()) {
            held_.erase(found);
            return done(
                ReleaseOutcome{r->deleted ? ReleaseOutcome::Kind::released : ReleaseOutcome::Kind::not_held, 0});
          }
          // Unknown: the hold stays (releasing, its name kept from new
          // attempts), so a repeated release asks the server again, and the
          // key is deleted again in the background until it is gone (it
          // would block every waiter for as long as the lease lives).
          if (refused_for_good(r.status())) {
            let_lease_go(r.status());
            return done(refused_release(r.status()));
          }
          remove_key({found->second.key, found->second.revision, false}, [](Status) {});
          done(r.status());
        });
      });
}

bool EtcdBackend::refused_for_good(const Status& s) {
  return s.code() == Errc::auth_failed || s.code() == Errc::permission_denied;
}

// The server refuses this client's deletes (its password changed, its role
// revoked): the key would stay as long as the lease is kept alive, which
// needs no rights (etcd 3.4's keep-alives carry no token), so the lease is
// let go. Every hold on it is lost, and the lock frees within one lease.
void EtcdBackend::let_lease_go(const Status& refused) {
  lease_ended(LossReason::unreachable, "a release was refused (" + refused.to_string() +
                                           "); the lease is no longer kept alive, so its keys go within its TTL (" +
                                           std::to_string(ttl_.count()) + " s)");
}

Status EtcdBackend::refused_release(const Status& refused) {
  return Status(refused.code(), refused.message() + "; the lock's lease is let go: it frees within its TTL");
}

void EtcdBackend::abandon(const AbandonCall& call, StatusDone done) {
  if (auto it = attempts_.find(call.attempt); it != attempts_.end()) {
    Attempt a = std::move(it->second);
    attempts_.erase(it);
    drop_watches(a);
    if (!a.sent) return post(std::move(done), Status());
    return remove_key({a.key, a.revision, true}, std::move(done));
  }
  if (auto it = held_.find(call.grant); it != held_.end()) {  // a grant undone (it came too late)
    Held h = std::move(it->second);
    held_.erase(it);
    forget_fast(call.grant);
    drop_watch(h.watch);
    return remove_key({h.key, h.revision, false}, std::move(done));
  }
  post(std::move(done), Status());
}

void EtcdBackend::remove_key(Orphan o, StatusDone done) {
  // A guarded key's name is kept from now on: no new acquire of this client
  // may put a key of that name, which this delete or the guard would remove.
  if (o.guard) guarded_.try_emplace(o.key, 0);
  deleting_.insert(o.key);  // its name is not given to a new attempt meanwhile
  ++calls_;
  // Whichever key is there when a put may still land (its create revision
  // is not known for sure).
  const std::int64_t revision = o.guard ? 0 : o.revision;
  rpc_->erase_created(o.key, revision, by(), [this, o, done = std::move(done)](Result<EtcdRpc::Erased> r) {
    asio::post(io_, [this, o, done = std::move(done), r = std::move(r)]() mutable {
      if (closed_) return done(cancelled());
      if (auto pending = deleting_.find(o.key); pending != deleting_.end()) deleting_.erase(pending);
      if (r.ok()) {
        // A release left unknown is over now.
        std::erase_if(held_, [&](const auto& h) {
          return h.second.releasing && h.second.key == o.key && h.second.revision == o.revision;
        });
        if (o.guard && lease_ != 0) guard_key(o.key, r->revision + 1);
        return done(Status());
      }
      orphans_.push_back(o);
      if (orphans_.size() == 1) {
        orphan_retry_.expires_after(kRetryDelay);
        orphan_retry_.async_wait([this](const boost::system::error_code& ec) {
          if (!ec && !closed_) retry_orphans();
        });
      }
      done(r.status());
    });
  });
}

void EtcdBackend::guard_key(const std::string& key, std::int64_t from) {
  if (auto it = guarded_.find(key); it != guarded_.end()) drop_watch(it->second);
  if (guarded_.size() >= kMaxGuards) {
    drop_watch(guarded_.begin()->second);
    guarded_.erase(guarded_.begin());
  }
  guarded_[key] = watch_key(key, from, {WatchFor::Kind::stray, 0, key}, {}, false);
}

void EtcdBackend::retry_orphans() {
  auto orphans = std::move(orphans_);
  orphans_.clear();
  for (auto& o : orphans) remove_key(std::move(o), [](Status) {});
}

void EtcdBackend::renew(const std::vector<RenewCall>&, std::function<void(Result<std::vector<RenewOutcome>>)> done) {
  post(std::move(done), Status(Errc::invalid_argument, "etcd locks are kept by the client's lease, not renewed"));
}

void EtcdBackend::inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) {
  ++calls_;
  rpc_->read_line(line_of(name), false, by(), [this, prefix = line_of(name), done = std::move(done)](auto r) mutable {
    asio::post(io_, [this, prefix, done = std::move(done), r = std::move(r)]() mutable {
      if (closed_) return done(cancelled());
      if (!r.ok()) return done(r.status());
      LockInfo info;
      info.last_fence = static_cast<std::uint64_t>(r->revision);  // the next key is created above it
      const auto line = entries_of(r->kvs, prefix);
      if (line.empty()) return done(info);
      const std::size_t granted = detail::granted_count(line);
      info.held = true;
      info.fence = static_cast<std::uint64_t>(line.front().seq);
      info.reentry_count = 1;  // levels are counted by the holding client
      info.holders = static_cast<unsigned>(granted);
      info.shared = line.front().mode == detail::LockMode::shared;
      info.waiters = static_cast<unsigned>(line.size() - granted);
      for (const KeyValue& kv : r->kvs)
        if (kv.key == line.front().name) info.holder = kv.value;
      done(info);
    });
  });
}

// Every key under the prefix whose last segment is a waiter's: the name is
// what comes before it.
void EtcdBackend::names(const std::string& prefix, std::function<void(Result<std::vector<std::string>>)> done) {
  ++calls_;
  rpc_->read_line(config_.prefix + prefix, true, by(), [this, prefix, done = std::move(done)](auto r) mutable {
    asio::post(io_, [this, prefix, done = std::move(done), r = std::move(r)]() mutable {
      if (closed_) return done(cancelled());
      if (!r.ok()) return done(r.status());
      std::set<std::string> found;
      for (const KeyValue& kv : r->kvs) {
        const std::string_view rest = std::string_view(kv.key).substr(config_.prefix.size());
        const auto slash = rest.rfind('/');
        if (slash == std::string_view::npos || !waiter_segment(rest.substr(slash + 1))) continue;
        if (const std::string_view name = rest.substr(0, slash); !name.empty() && name.starts_with(prefix))
          found.emplace(name);
      }
      done(std::vector<std::string>(found.begin(), found.end()));
    });
  });
}

std::unique_ptr<detail::Backend> make_etcd_backend(asio::io_context& io, EtcdBackendConfig config) {
  return std::make_unique<EtcdBackend>(io, std::move(config));
}

}  // namespace dlock::etcd

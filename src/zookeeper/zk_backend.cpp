// The lock, per acquire():
//   1. create  <base>/<name>/_c_<guid>-<kind>-<seq>, ephemeral and
//      sequential, once per acquire (the guid is the acquire's; a create
//      whose reply was lost is found again by it, never made twice; the
//      kind says exclusive, read or N permits, see lock_queue.hpp; the data
//      is the owner and the holder's info);
//   2. list the queue: the line in sequence order says who holds (the
//      lowest sequence for an exclusive lock, every node with no writer
//      ahead for a read lock, the first N for permits), granted with the
//      node's czxid as the fence (a zxid: it grows across every write of
//      the ensemble, so it survives a re-created parent, which restarts the
//      sequence), and only if the node belongs to the current session (the
//      CURATOR-604 check);
//   3. otherwise watch only the nodes whose deletion may let it in (a
//      writer its predecessor, a reader the nearest writer ahead: no herd,
//      one release wakes one waiter; a permit waiter the N nodes ahead) and
//      answer busy; the watch event wakes exactly that attempt, whose next
//      try lists the queue again.
// A release deletes the node; an acquire that ends without a grant deletes
// its node (a delete that fails is retried on every reconnect).
//
// How the session vouches for the holds: zk_liveness.cpp.
#include "zookeeper/zk_backend.hpp"

#include "core/token.hpp"
#include "core/validity.hpp"
#include "zookeeper/lock_queue.hpp"
#include "zookeeper/zk_lock.hpp"

namespace dlock::zookeeper {

detail::Capabilities ZkBackend::capabilities() const {
  detail::Capabilities c;
  c.needs_renewal = false;  // the session's heartbeat keeps the nodes
  c.server_reentry = false;
  c.lines = true;        // shared and counted nodes in the same queue
  c.always_fair = true;  // the queue is granted in arrival order
  return c;
}

void ZkBackend::start(StatusDone done) {
  start_done_ = std::move(done);
  if (Status s = open_session(); !s.ok()) return finish_start(s);
  start_timer_.expires_after(config_.connect_timeout);
  start_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !start_done_) return;
    finish_start({Errc::unavailable, "zookeeper: no server of " + config_.hosts + " opened a session within " +
                                         std::to_string(config_.connect_timeout.count()) + " ms"});
  });
}

void ZkBackend::close() {
  closed_ = true;
  start_timer_.cancel();
  heartbeat_.cancel();
  deadline_.cancel();
  watch_timer_.cancel();
  if (start_done_) finish_start(cancelled());
  grant_proven();
  session_.close();  // the session's nodes go now; pending calls complete (closed_: cancelled)
}

Status ZkBackend::refuse(const AcquireCall& call) const {
  if (config_.naming == Naming::kazoo)
    if (Status s = kazoo_refusal(call.mode, call.permits); !s.ok()) return s;
  const bool shared = call.mode == detail::LockMode::shared;
  if (!held_.holds_other_mode(call.name, call.owner, shared)) return {};
  return detail::upgrade_refused(call);
}

void ZkBackend::acquire(const AcquireCall& call, AcquireDone done) {
  if (Status s = refuse(call); !s.ok()) return post(std::move(done), s);
  auto [it, fresh] = attempts_.try_emplace(call.attempt);
  Attempt& a = it->second;
  if (fresh) {
    a.name = call.name;
    a.owner = call.owner;
    a.guid = detail::random_token();
    a.parent = config_.base + "/" + encode_name(call.name);
    a.mode = call.mode;
    a.permits = call.mode == detail::LockMode::shared ? call.permits : 0;
    a.info = call.info;
  }
  a.grant = call.grant;
  a.recreated = 0;
  if (a.node.empty() && a.create_unknown) return recover(call.attempt, std::move(done));
  if (a.node.empty()) return create_node(call.attempt, std::move(done));
  check_queue(call.attempt, std::move(done));
}

void ZkBackend::release(const ReleaseCall& call, std::function<void(Result<ReleaseOutcome>)> done) {
  const auto node = held_.start_release(call.grant);
  if (!node) return post(std::move(done), ReleaseOutcome{ReleaseOutcome::Kind::not_held, 0});
  session_.remove(*node, [this, grant = call.grant, done = std::move(done)](Reply r) {
    if (closed_) return done(cancelled());
    if (answered(r.rc)) heard(r.sent_at);
    if (r.rc == ZOK || r.rc == ZNONODE) {
      held_.erase(grant);
      return done(ReleaseOutcome{r.rc == ZOK ? ReleaseOutcome::Kind::released : ReleaseOutcome::Kind::not_held, 0});
    }
    // Unlike a lease, the node would outlive this call for as long as the
    // session lives, blocking every waiter: it is deleted again on every
    // reconnect until it is gone.
    if (auto path = held_.find(grant)) orphans_.push_back({"", "", *path});
    done(rc_status(r.rc, "delete the lock node", Errc::outcome_unknown));
  });
}

void ZkBackend::abandon(const AbandonCall& call, StatusDone done) {
  if (auto it = attempts_.find(call.attempt); it != attempts_.end()) {
    Attempt a = std::move(it->second);
    attempts_.erase(it);
    if (a.node.empty() && !a.create_unknown) return post(std::move(done), Status());
    Orphan o{a.parent, a.guid, a.node};
    return remove_orphan(std::move(o), std::move(done));
  }
  if (auto path = held_.start_release(call.grant)) {  // a grant undone (it came too late)
    Orphan o{"", "", *path};
    held_.erase(call.grant);
    return remove_orphan(std::move(o), std::move(done));
  }
  post(std::move(done), Status());
}

void ZkBackend::renew(const std::vector<RenewCall>&, std::function<void(Result<std::vector<RenewOutcome>>)> done) {
  post(std::move(done), Status(Errc::invalid_argument, "zookeeper locks are kept by the session, not renewed"));
}

void ZkBackend::inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) {
  const std::string parent = config_.base + "/" + encode_name(name);
  session_.children(parent, [this, parent, done = std::move(done)](Reply r) mutable {
    if (closed_) return done(cancelled());
    if (answered(r.rc)) heard(r.sent_at);
    if (r.rc == ZNONODE) return done(LockInfo{});
    if (r.rc != ZOK) return done(rc_status(r.rc, "list the lock queue"));
    const auto line = line_of(r.children);
    LockInfo info;
    info.last_fence = static_cast<std::uint64_t>(r.stat.pzxid);
    if (line.empty()) return done(info);
    const std::size_t granted = granted_count(line);
    info.holders = static_cast<unsigned>(granted);
    info.shared = line.front().mode == detail::LockMode::shared;
    info.waiters = static_cast<unsigned>(line.size() - granted);
    session_.get(parent + "/" + line.front().name, false,
                 [this, info, child = line.front().name, done = std::move(done)](Reply e) mutable {
                   if (closed_) return done(cancelled());
                   if (e.rc == ZNONODE) return done(info);  // released meanwhile
                   if (e.rc != ZOK) return done(rc_status(e.rc, "read the lock node"));
                   info.held = true;
                   info.fence = static_cast<std::uint64_t>(e.stat.czxid);
                   info.reentry_count = 1;  // levels are counted by the holding client
                   info.last_fence = std::max(info.last_fence, info.fence);
                   info.holder = holder_of(child, e.data);
                   done(info);
                 });
  });
}

// The lock parent's children: a lock node stays after its queue empties,
// so the caller's inspect tells held from free.
void ZkBackend::names(const std::string& prefix, std::function<void(Result<std::vector<std::string>>)> done) {
  session_.children(config_.base, [this, prefix, done = std::move(done)](Reply r) mutable {
    if (closed_) return done(cancelled());
    if (answered(r.rc)) heard(r.sent_at);
    if (r.rc == ZNONODE) return done(std::vector<std::string>{});
    if (r.rc != ZOK) return done(rc_status(r.rc, "list the locks"));
    std::vector<std::string> out;
    for (const std::string& child : r.children)
      if (std::string name = decode_name(child); !name.empty() && name.starts_with(prefix)) out.push_back(name);
    done(std::move(out));
  });
}

void ZkBackend::observe(const std::string& name, StatusDone ready) {
  if (observers_[name]++ > 0) return post(std::move(ready), Status());
  observed_[config_.base + "/" + encode_name(name)] = name;
  arm_observer(name, std::move(ready));
}

void ZkBackend::unobserve(const std::string& name) {
  auto it = observers_.find(name);
  if (it == observers_.end() || --it->second > 0) return;
  observers_.erase(it);
  observed_.erase(config_.base + "/" + encode_name(name));  // the server's watch fires once into nothing
}

void ZkBackend::arm_observer(const std::string& name, StatusDone ready) {
  const std::string parent = config_.base + "/" + encode_name(name);
  session_.children(
      parent,
      [this, name, parent, ready = std::move(ready)](Reply r) mutable {
        if (closed_) return ready(cancelled());
        if (answered(r.rc)) heard(r.sent_at);
        if (r.rc == ZOK) return ready(Status());
        if (r.rc != ZNONODE) return ready(rc_status(r.rc, "watch the lock queue"));
        // No lock node yet (or no more): watched for its creation.
        session_.exists(parent, true, [this, name, ready = std::move(ready)](Reply e) mutable {
          if (closed_) return ready(cancelled());
          if (answered(e.rc)) heard(e.sent_at);
          if (e.rc == ZNONODE) return ready(Status());
          if (e.rc != ZOK) return ready(rc_status(e.rc, "watch for the lock node"));
          // Made meanwhile: its children are watched now (a change may
          // have been missed: told as one).
          if (observers_.count(name) && events_.released) events_.released({name, 0});
          arm_observer(name, std::move(ready));
        });
      },
      ZkSession::Delivery::loop, true);
}

void ZkBackend::drop_later(Orphan o) {
  loop([this, o = std::move(o)]() mutable { remove_orphan(std::move(o), [](Status) {}); });
}

void ZkBackend::log(LogLevel level, const std::string& message) {
  if (config_.log) config_.log(level, message);
}

void ZkBackend::create_node(std::uint64_t id, AcquireDone done) {
  const Attempt& sent = attempts_.at(id);
  if (!known_parents_.contains(sent.parent))
    session_.create(sent.parent, "", ZOO_CONTAINER, creator_acl(), [](Reply) {});  // told by the next reply
  auto flow = std::make_shared<Pipelined>();
  flow->done = std::move(done);
  session_.create(sent.parent + "/" + child_prefix(sent.guid, sent.mode, sent.permits, config_.naming),
                  node_data(config_.naming, sent.owner, sent.info), ZOO_EPHEMERAL_SEQUENTIAL, creator_acl(),
                  [this, id, flow](Reply r) { on_created(id, flow, std::move(r)); });
  session_.children(sent.parent, [this, id, flow](Reply r) {
    if (flow->created) on_listed(id, std::move(flow->done), std::move(r));
  });
}

void ZkBackend::on_created(std::uint64_t id, const std::shared_ptr<Pipelined>& flow, Reply r) {
  Attempt* a = live(id, flow->done, r);
  if (!a) return;
  if (r.rc == ZOK) {
    a->node = r.path;
    a->czxid = r.stat.czxid;
    a->session = r.stat.ephemeral_owner;
    known_parents_.insert(a->parent);
    flow->created = true;  // the listing comes next
    return;
  }
  AcquireDone done = std::move(flow->done);
  if (r.rc == ZNONODE && a->recreated++ < 3) {  // the base is missing too
    known_parents_.erase(a->parent);
    return make_path(a->parent, [this, id, done = std::move(done)](Status s) mutable {
      if (!s.ok()) return done(s);
      if (!attempts_.count(id)) return done(session_gone());
      create_node(id, std::move(done));
    });
  }
  if (connection_lost(r.rc)) {
    a->create_unknown = true;
    return done(Status(Errc::unavailable,
                       "zookeeper: the connection dropped while creating the queue node; the next attempt finds "
                       "it by its id",
                       rc_name(r.rc)));
  }
  done(rc_status(r.rc, "create the queue node"));
}

void ZkBackend::recover(std::uint64_t id, AcquireDone done) {
  // A sync first: the server this session reconnected to may not have
  // applied the lost create yet, and a listing it answers alone would miss
  // it (the node then made anew leaves that one behind).
  synced_children(attempts_.at(id).parent, [this, id, done = std::move(done)](int synced, Reply r) mutable {
    Attempt* a = live(id, done, r);
    if (!a) return;
    if (synced != ZOK && synced != ZNONODE) return done(rc_status(synced, "sync before looking for the queue node"));
    if (r.rc != ZOK && r.rc != ZNONODE) return done(rc_status(r.rc, "look for the queue node"));
    a->create_unknown = false;
    const auto found = r.rc == ZOK ? find_by_guid(r.children, a->guid) : std::nullopt;
    if (!found) return create_node(id, std::move(done));
    const std::string path = a->parent + "/" + *found;
    session_.exists(path, false, [this, id, path, done = std::move(done)](Reply e) mutable {
      Attempt* b = live(id, done, e);
      if (!b) return;
      if (e.rc == ZOK && e.stat.ephemeral_owner == session_id_) {
        b->node = path;
        b->czxid = e.stat.czxid;
        b->session = e.stat.ephemeral_owner;
        return check_queue(id, std::move(done));
      }
      if (e.rc != ZOK && e.rc != ZNONODE) {
        b->create_unknown = true;
        return done(rc_status(e.rc, "read the queue node"));
      }
      if (e.rc == ZOK) remove_orphan({"", "", path}, [](Status) {});  // another session's: not ours to use
      create_node(id, std::move(done));
    });
  });
}

void ZkBackend::check_queue(std::uint64_t id, AcquireDone done) {
  session_.children(attempts_.at(id).parent, [this, id, done = std::move(done)](Reply r) mutable {
    on_listed(id, std::move(done), std::move(r));
  });
}

void ZkBackend::on_listed(std::uint64_t id, AcquireDone done, Reply r) {
  Attempt* a = live(id, done, r);
  if (!a) return;
  if (r.rc != ZOK && r.rc != ZNONODE) return done(rc_status(r.rc, "list the lock queue"));
  // Another node of this attempt's guid is its own create whose answer was
  // lost and that a listing on another server missed (it was committed
  // after): nobody else would ever delete it while the session lives.
  // Deleted, then the line listed again (one session's requests run in
  // order, so the listing sees the delete).
  if (r.rc == ZOK && a->ghosts_removed < 3) {
    bool ghost = false;
    for (const auto& n : nodes_of_guid(r.children, a->guid))
      if (n != basename_of(a->node)) {
        remove_orphan({"", "", a->parent + "/" + n}, [](Status) {});
        ghost = true;
      }
    if (ghost) {
      ++a->ghosts_removed;
      return check_queue(id, std::move(done));
    }
  }
  const Standing st = r.rc == ZOK ? standing_of(line_of(r.children), basename_of(a->node)) : Standing{};
  if (!st.present || a->session != session_id_) {
    // Gone (deleted by hand, its parent removed) or not this session's:
    // never counted, made anew.
    if (a->recreated++ >= 3)
      return done(Status(Errc::server_error, "zookeeper: the queue node keeps vanishing under " + a->parent));
    if (st.present) remove_orphan({"", "", a->node}, [](Status) {});
    a->node.clear();
    return create_node(id, std::move(done));
  }
  // The node stays until the acquire ends: its abandon removes it.
  if (st.disagrees) return done(detail::disagreeing(a->name, a->permits, *st.disagrees));
  if (st.granted) return grant(id, std::move(done));
  watch_ahead(id, st, r.stat.pzxid, std::move(done));
}

void ZkBackend::watch_ahead(std::uint64_t id, const Standing& st, std::int64_t pzxid, AcquireDone done) {
  const std::string parent = attempts_.at(id).parent;
  if (st.watch_children) {
    session_.children(
        parent,
        [this, id, parent, pzxid, done = std::move(done)](Reply r) mutable {
          if (!live(id, done, r)) return;
          if (r.rc != ZOK && r.rc != ZNONODE) return done(rc_status(r.rc, "watch the lock queue"));
          if (r.rc == ZOK) child_watchers_[parent].insert(id);
          // Changed since the listing: look again at once.
          if (r.rc != ZOK || r.stat.pzxid != pzxid)
            return done(AcquireOutcome::busy_with(detail::WaitHint::retry(milliseconds(0))));
          done(AcquireOutcome::busy_with(detail::WaitHint::watched()));
        },
        ZkSession::Delivery::loop, true);
    return;
  }
  struct Watching {
    AcquireDone done;
    std::size_t left = 0;
    bool gone = false;
    Status error;
  };
  auto w = std::make_shared<Watching>();
  w->done = std::move(done);
  w->left = st.watch.size();
  for (const auto& node : st.watch) {
    const std::string ahead = parent + "/" + node;
    // getData, not exists: a node gone meanwhile leaves no watch behind.
    session_.get(ahead, true, [this, id, ahead, w](Reply e) {
      if (answered(e.rc)) heard(e.sent_at);
      if (e.rc == ZOK && !closed_ && attempts_.count(id))
        watchers_[ahead].insert(id);
      else if (e.rc == ZNONODE)
        w->gone = true;
      else if (e.rc != ZOK && w->error.ok())
        w->error = rc_status(e.rc, "watch the node ahead");
      if (--w->left > 0) return;
      if (closed_) return w->done(cancelled());
      if (!attempts_.count(id)) return w->done(session_gone());
      if (w->gone)
        return w->done(AcquireOutcome::busy_with(detail::WaitHint::retry(milliseconds(0))));  // one went: look again
      if (!w->error.ok()) return w->done(w->error);
      w->done(AcquireOutcome::busy_with(detail::WaitHint::watched()));
    });
  }
}

void ZkBackend::grant(std::uint64_t id, AcquireDone done) {
  if (Clock::now() >= until_) {
    if (unproven_.empty())
      log(LogLevel::info, "zookeeper: a grant waits for the leader's next proof of the session (the last ran out " +
                              std::to_string(std::chrono::duration_cast<milliseconds>(Clock::now() - until_).count()) +
                              " ms ago)");
    unproven_.emplace_back(id, std::move(done));
    return;
  }
  auto it = attempts_.find(id);
  Attempt a = std::move(it->second);
  attempts_.erase(it);
  HeldNode held{a.node, a.name, a.owner, a.session};
  held.shared = a.mode == detail::LockMode::shared;
  if (!held_.add(a.grant, std::move(held))) return done(session_gone());
  watch_soon(a.node);
  arm_deadline();
  // Valid for what the leader vouches for, never a follower's reply.
  done(AcquireOutcome::granted_now(static_cast<std::uint64_t>(a.czxid), until_));
}

void ZkBackend::grant_proven() {
  for (auto& [id, done] : std::exchange(unproven_, {})) {
    if (closed_) {
      done(cancelled());
    } else if (!attempts_.count(id)) {
      done(session_gone());  // abandoned meanwhile, or its session ended
    } else {
      grant(id, std::move(done));
    }
  }
}

Status ZkBackend::session_gone() {
  return {Errc::unavailable, "zookeeper: the session ended during the attempt; a new one is opened"};
}

ZkBackend::Attempt* ZkBackend::live(std::uint64_t id, AcquireDone& done, const Reply& r) {
  if (closed_) {
    done(cancelled());
    return nullptr;
  }
  if (answered(r.rc)) heard(r.sent_at);
  auto it = attempts_.find(id);
  if (it == attempts_.end()) {
    done(session_gone());
    return nullptr;
  }
  return &it->second;
}

void ZkBackend::make_path(const std::string& path, StatusDone done, std::size_t from) {
  const auto slash = path.find('/', from);
  const std::string part = path.substr(0, slash);
  const bool last = slash == std::string::npos;
  session_.create(part, "", last ? ZOO_CONTAINER : 0, creator_acl(),
                  [this, path, last, slash, done = std::move(done)](Reply r) mutable {
                    if (closed_) return done(cancelled());
                    // An ancestor this identity may not write to may still exist: go on,
                    // the next level tells.
                    const bool go_on = r.rc == ZOK || r.rc == ZNODEEXISTS || (r.rc == ZNOAUTH && !last);
                    if (!go_on) return done(rc_status(r.rc, "create " + path));
                    if (last) return done(Status());
                    make_path(path, std::move(done), slash + 1);
                  });
}

// Most holds end sooner than kOwnWatchDelay, and the watch costs a request
// and, at the release, an event: W1 lost a tenth of its rate to it. The
// watch's request also finds a node deleted before it (ZNONODE), so a hold
// deleted by hand is told late by that delay at most.
void ZkBackend::watch_soon(const std::string& path) {
  {
    std::lock_guard lk(watch_mu_);
    watch_due_.push_back(path);
    if (watch_armed_) return;
    watch_armed_ = true;
  }
  loop([this] { arm_watch_timer(); });
}

void ZkBackend::arm_watch_timer() {
  watch_timer_.expires_after(kOwnWatchDelay);
  watch_timer_.async_wait([this](const boost::system::error_code& ec) {
    std::vector<std::string> due;
    {
      std::lock_guard lk(watch_mu_);
      watch_armed_ = false;
      due.swap(watch_due_);
    }
    if (ec || closed_) return;
    for (const auto& p : due)
      if (held_.holds_path(p)) watch_own(p);
  });
}

void ZkBackend::watch_own(const std::string& path) {
  session_.get(path, true, [this, path](Reply r) {
    if (closed_) return;
    if (answered(r.rc)) heard(r.sent_at);
    if (r.rc == ZNONODE) node_lost(path);  // deleted before the watch was set
  });
}

void ZkBackend::node_lost(const std::string& path) {
  auto lost = held_.take_lost(path);
  if (!lost) return;
  log(LogLevel::warning, "zookeeper: the lock node " + path + " was deleted while held (by hand or by a tool)");
  if (events_.lost) events_.lost({{lost->second.name, lost->second.owner, lost->first}}, LossReason::expired);
}

void ZkBackend::on_node_event(int type, const std::string& path) {
  if (held_.holds_path(path)) {
    if (type == ZOO_DELETED_EVENT) return node_lost(path);
    return watch_own(path);  // changed: a data watch fires once, so it is set again
  }
  const auto wake = [this](std::map<std::string, std::set<std::uint64_t>>& by_path, const std::string& p) {
    auto it = by_path.find(p);
    if (it == by_path.end()) return;
    const std::set<std::uint64_t> ids = std::move(it->second);
    by_path.erase(it);
    for (std::uint64_t id : ids) {
      auto a = attempts_.find(id);
      if (a != attempts_.end() && events_.released) events_.released({a->second.name, id});
    }
  };
  wake(watchers_, path);
  wake(child_watchers_, path);  // a lock node's children changed
  if (auto it = observed_.find(path); it != observed_.end()) {
    const std::string name = it->second;
    arm_observer(name, [](Status) {});  // watches fire once: set again, then told
    if (events_.released) events_.released({name, 0});
  }
}

void ZkBackend::remove_orphan(Orphan o, StatusDone done) {
  if (!o.path.empty()) {
    session_.remove(o.path, [this, o, done = std::move(done)](Reply r) mutable {
      if (closed_) return done(cancelled());
      if (r.rc == ZOK || r.rc == ZNONODE) {
        forget_held(o.path);
        return done(Status());
      }
      orphans_.push_back(o);
      done(rc_status(r.rc, "delete an abandoned queue node"));
    });
    return;
  }
  // Synced first, as in recover(): a listing must not miss the create.
  synced_children(o.parent, [this, o, done = std::move(done)](int synced, Reply r) mutable {
    if (closed_) return done(cancelled());
    if (synced != ZOK && synced != ZNONODE) {
      orphans_.push_back(o);
      return done(rc_status(synced, "sync before looking for an abandoned queue node"));
    }
    if (r.rc == ZNONODE) return done(Status());
    if (r.rc != ZOK) {
      orphans_.push_back(o);
      return done(rc_status(r.rc, "look for an abandoned queue node"));
    }
    // Every node of the guid (a lost create may have made two).
    const auto found = nodes_of_guid(r.children, o.guid);
    if (found.empty()) return done(Status());
    for (std::size_t i = 0; i + 1 < found.size(); ++i)
      remove_orphan({"", "", o.parent + "/" + found[i]}, [](Status) {});
    remove_orphan({"", "", o.parent + "/" + found.back()}, std::move(done));
  });
}

void ZkBackend::synced_children(const std::string& parent, std::function<void(int, Reply)> done) {
  auto synced = std::make_shared<int>(ZOK);
  session_.sync(parent, [synced](Reply r) { *synced = r.rc; });
  session_.children(parent, [synced, done = std::move(done)](Reply r) { done(*synced, std::move(r)); });
}

void ZkBackend::retry_orphans() {
  auto orphans = std::move(orphans_);
  orphans_.clear();
  for (auto& o : orphans) remove_orphan(std::move(o), [](Status) {});
}

std::unique_ptr<detail::Backend> make_zk_backend(asio::io_context& io, ZkConfig config) {
  return std::make_unique<ZkBackend>(io, std::move(config));
}

}  // namespace dlock::zookeeper

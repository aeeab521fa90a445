// The watch stream: every watch of this client (its waiters' keys ahead,
// its holds' keys, observers' lines, strays) on one gRPC stream to one
// member, and what its news means. A member can stop answering without
// closing its connection (frozen, swapped out, cut off behind a proxy):
// the stream then hears nothing, and gRPC's pings drop the connection only
// 3 to 8 s later. So while anything is watched, a stream silent for
// kProbeAfter is probed (etcd's progress request, answered at once); one
// still silent probe_answer() later is given up: its member is passed over
// for kSuspectFor, and every watch moves to another member at once (a
// waiter looks again; a hold is watched again from its own revision, so a
// delete meanwhile is told). News thus reaches a client at most about
// kProbeAfter + probe_answer() + kProbeTick after its member froze.
// A silence is judged only once a member has answered a probe: etcd
// before 3.4 ignores them, and newer ones answer only a stream whose
// watches are all in place (so the first probe waits for a confirmed one).
// With no other member connected, a silent stream is left to gRPC's pings.
#include "etcd/etcd_lock.hpp"

namespace dlock::etcd {
namespace {

constexpr milliseconds kProbeTick{250};
constexpr milliseconds kProbeAfter{1000};        // of silence
constexpr std::chrono::seconds kSuspectFor{10};  // past gRPC's own pings (3 to 8 s)

}  // namespace

void EtcdBackend::open_watches(std::optional<std::size_t> avoid) {
  // What an earlier stream still says (queued behind this) is not news.
  const std::uint64_t stream = ++stream_;
  watches_ = rpc_->watches(
      [this, stream](const EtcdRpc::WatchNews& news) {
        loop([this, stream, news] {
          if (stream == stream_) on_news(news);
        });
      },
      [this, stream](Status why) {
        loop([this, stream, why] {
          if (stream == stream_) on_watches_ended(why);
        });
      },
      avoid);
  probe_sent_ = {};  // watch_key() arms the probe's tick again
  // Holds and observers watch again (a deletion meanwhile is found by
  // starting from the revision each last saw); waiters look again.
  for (auto& [grant, h] : held_) h.watch = watch_key(h.key, h.revision + 1, {WatchFor::Kind::hold, grant, {}});
  for (auto& [name, obs] : observers_) arm_observer(name, true);
  // A stray put may have landed while no watch was looking.
  for (auto& [key, watch] : guarded_) {
    watch = 0;
    remove_key({key, 0, true}, [](Status) {});
  }
}

void EtcdBackend::on_watches_ended(const Status& why, std::optional<std::size_t> silent) {
  if (!watches_) return;
  if (!silent) log(LogLevel::warning, "etcd: the watch stream ended (" + why.to_string() + "); opening another");
  ++stream_;  // what it still says is not news
  watches_.reset();
  watching_.clear();
  for (auto& [id, a] : attempts_) a.watches.clear();
  for (auto& [grant, h] : held_) h.watch = 0;
  for (auto& [name, o] : observers_) o.watch = 0;
  ++reconnects_;
  if (events_.resync) events_.resync();     // every waiter looks again
  if (silent) return open_watches(silent);  // on another member, at once
  watch_retry_.expires_after(kRetryDelay);
  watch_retry_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec && !closed_) open_watches();
  });
}

std::int64_t EtcdBackend::watch_key(const std::string& key, std::int64_t from, WatchFor what,
                                    const std::string& range_end, bool deletes_only) {
  if (!watches_) return 0;
  const std::int64_t id = next_watch_++;
  if (!watches_->add(id, key, range_end, from, deletes_only)) return 0;
  watching_.emplace(id, std::move(what));
  probe_soon();
  return id;
}

void EtcdBackend::probe_soon() {
  if (probing_ || closed_) return;
  probing_ = true;
  probe_timer_.expires_after(kProbeTick);
  probe_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || closed_) return;
    probing_ = false;
    if (!watches_ || watching_.empty()) return;
    const auto now = Clock::now();
    const auto heard = watches_->last_heard();
    const bool asked = probe_sent_ != Clock::time_point{} && heard < probe_sent_;
    if (asked && now - probe_sent_ >= probe_answer()) {
      if (probes_work_) return stream_silent(now - heard);
      probe_sent_ = {};  // never answered anywhere: no verdict, and no more until a watch is confirmed
    } else if (!asked && probes_work_ && now - heard >= kProbeAfter) {
      probe_sent_ = now;
      watches_->probe();
    }
    probe_soon();
  });
}

// A watch in place: the first probe goes out, to learn whether the members
// answer them (once one has, silences are judged).
void EtcdBackend::probe_confirmed() {
  if (probes_work_ || probe_sent_ != Clock::time_point{} || !watches_) return;
  probe_sent_ = Clock::now();
  watches_->probe();
}

// Half the command timeout (1 s by default), at least 0.5 s: a member
// slower than that to answer is as good as frozen for calls too, and a
// slow network (a larger command timeout) is not taken for a frozen one.
milliseconds EtcdBackend::probe_answer() const {
  return std::max<milliseconds>(config_.command_timeout / 2, milliseconds(500));
}

void EtcdBackend::stream_silent(Clock::duration silent) {
  const std::size_t member = watches_->member();
  if (!rpc_->other_connected(member)) {
    // Reopened there, it would be as silent: gRPC's pings decide.
    probe_sent_ = {};
    probe_soon();
    return log(LogLevel::debug, "etcd: member " + rpc_->endpoint(member) +
                                    " is silent on the watch stream, and no other member is connected");
  }
  log(LogLevel::warning, "etcd: member " + rpc_->endpoint(member) + " has said nothing on the watch stream for " +
                             std::to_string(std::chrono::duration_cast<milliseconds>(silent).count()) +
                             " ms, a probe included; watching through another member");
  rpc_->suspect(member, Clock::now() + kSuspectFor);
  on_watches_ended(Status(Errc::unavailable, "etcd: the watch stream's member is silent"), member);
}

// A hold's key is watched once it has been held kHoldWatchDelay (from its
// create revision on, so a delete meanwhile is still told): most holds
// end before, and cost the server no watch at all.
void EtcdBackend::watch_hold_soon(std::uint64_t grant) {
  unwatched_.push_back(grant);
  if (unwatched_.size() > 1) return;  // the timer is armed
  hold_watch_timer_.expires_after(kHoldWatchDelay);
  hold_watch_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || closed_) return;
    for (std::uint64_t g : std::exchange(unwatched_, {})) {
      auto it = held_.find(g);
      if (it == held_.end() || it->second.releasing || it->second.watch != 0) continue;
      it->second.watch = watch_key(it->second.key, it->second.revision + 1, {WatchFor::Kind::hold, g, {}});
    }
  });
}

void EtcdBackend::drop_watch(std::int64_t& id) {
  if (id == 0) return;
  watching_.erase(id);
  if (watches_) watches_->remove(id);
  id = 0;
}

void EtcdBackend::observe(const std::string& name, StatusDone ready) {
  Observer& o = observers_[name];
  if (o.refs++ > 0 && o.in_place) return post(std::move(ready), Status());
  o.ready.push_back(std::move(ready));
  if (o.refs == 1) arm_observer(name, false);
}

void EtcdBackend::unobserve(const std::string& name) {
  auto it = observers_.find(name);
  if (it == observers_.end() || --it->second.refs > 0) return;
  drop_watch(it->second.watch);
  for (auto& ready : it->second.ready) post(std::move(ready), cancelled());
  observers_.erase(it);
}

// Every change under the line from now on: a holder or a waiter came or
// went. Told as a release of attempt 0 (Election::observe looks again).
void EtcdBackend::arm_observer(const std::string& name, bool again) {
  Observer& o = observers_[name];
  drop_watch(o.watch);
  o.in_place = false;
  o.tell = o.tell || again;
  const std::string line = line_of(name);
  o.watch = watch_key(line, 0, {WatchFor::Kind::observer, 0, name}, prefix_end(line), false);
  if (o.watch != 0) return;
  // The stream is down: the observers look now, and again once it is back.
  for (auto& ready : o.ready) post(std::move(ready), Status(Errc::unavailable, "etcd: the watch stream is down"));
  o.ready.clear();
}

// The server confirmed the watch: whatever changes from here on is told.
void EtcdBackend::observer_ready(const std::string& name) {
  auto it = observers_.find(name);
  if (it == observers_.end()) return;
  Observer& o = it->second;
  o.in_place = true;
  for (auto& ready : o.ready) post(std::move(ready), Status());
  o.ready.clear();
  if (std::exchange(o.tell, false) && events_.released) events_.released({name, 0});
}

void EtcdBackend::on_news(const EtcdRpc::WatchNews& news) {
  if (news.progress) {  // a probe's answer: the stream is alive
    probes_work_ = true;
    return;
  }
  if (news.watch_id == -1) {
    // A watch the server refused to make (etcd names no id then): an
    // expired token, or a right missing. Authenticated again and the
    // stream made anew; every watch is set again and every waiter looks.
    log(LogLevel::warning, "etcd: a watch was refused (" + news.reason + "); opening the stream again");
    if (Status s = rpc_->reauthenticate(by()); !s.ok()) log(LogLevel::warning, "etcd: " + s.to_string());
    return on_watches_ended(Status(Errc::unavailable, "etcd: a watch was refused: " + news.reason));
  }
  auto it = watching_.find(news.watch_id);
  if (it == watching_.end()) return;  // dropped meanwhile
  const WatchFor what = it->second;
  if (news.created && !news.canceled) {
    probe_confirmed();
    if (what.kind == WatchFor::Kind::attempt) confirm_watch(what.id, what.name, news.revision);
    if (what.kind == WatchFor::Kind::observer) observer_ready(what.name);
    return;
  }
  if (news.canceled) {
    watching_.erase(it);
    if (news.compact_revision > 0)
      log(LogLevel::info, "etcd: a watch's start revision was compacted (now " + std::to_string(news.compact_revision) +
                              "); reading again");
  }
  switch (what.kind) {
    case WatchFor::Kind::attempt:
      return wake(what.id);
    case WatchFor::Kind::hold: {
      auto h = held_.find(what.id);
      if (h == held_.end() || h->second.releasing || fast_releasing(what.id)) return;
      if (news.canceled && !news.changed) {
        // Compacted past the grant: is the key still there? Read, then watch
        // from the read on.
        h->second.watch = 0;
        ++calls_;
        rpc_->read_line(h->second.key, true, by(), [this, grant = what.id](Result<EtcdRpc::Range> r) {
          loop([this, grant, r = std::move(r)] {
            auto still = held_.find(grant);
            if (still == held_.end() || still->second.releasing || !r.ok()) return;
            if (!created_at(r->kvs, still->second.key, still->second.revision)) return hold_lost(grant);
            still->second.watch = watch_key(still->second.key, r->revision + 1, {WatchFor::Kind::hold, grant, {}});
          });
        });
        return;
      }
      return hold_lost(what.id);
    }
    case WatchFor::Kind::observer:
      if (news.canceled) return arm_observer(what.name, true);
      if (events_.released) events_.released({what.name, 0});
      return;
    case WatchFor::Kind::stray:
      // A put that was still in flight landed after the delete (or the
      // watch ended): deleted again, and watched from then on.
      if (auto g = guarded_.find(what.name); g != guarded_.end() && g->second == news.watch_id) {
        drop_watch(g->second);  // kept in guarded_ (no key of a new acquire takes its name) until guarded again
        log(LogLevel::info, "etcd: deleting " + what.name + " again: an abandoned acquire's put landed late");
        remove_key({what.name, 0, true}, [](Status) {});
      }
      return;
  }
}

void EtcdBackend::hold_lost(std::uint64_t grant) {
  auto h = held_.find(grant);
  if (h == held_.end() || fast_releasing(grant)) return;  // released on a caller's thread meanwhile
  Held gone = std::move(h->second);
  held_.erase(h);
  forget_fast(grant);
  drop_watch(gone.watch);
  log(LogLevel::warning,
      "etcd: the lock key " + gone.key + " was deleted while held (by an operator, a tool, or its lease's end)");
  if (events_.lost) events_.lost({{gone.name, gone.owner, grant}}, LossReason::expired);
}

}  // namespace dlock::etcd

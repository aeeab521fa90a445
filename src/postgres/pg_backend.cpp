#include "postgres/pg_backend.hpp"

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "core/token.hpp"
#include "postgres/listen_hub.hpp"
#include "postgres/pg_blocking.hpp"
#include "postgres/schema.hpp"
#include "waiter_turns.hpp"

namespace dlock::postgres {
namespace {

namespace asio = boost::asio;
using detail::AbandonCall;
using detail::AcquireCall;
using detail::AcquireOutcome;
using detail::LockMode;
using detail::ReleaseCall;
using detail::ReleaseOutcome;
using detail::RenewCall;
using detail::RenewOutcome;
using detail::WatchKey;

std::int64_t to_int(const std::optional<std::string>& v) {
  std::int64_t out = 0;
  if (v) std::from_chars(v->data(), v->data() + v->size(), out);
  return out;
}

std::string as_bigint(std::uint64_t v) { return std::to_string(static_cast<std::int64_t>(v)); }

// A text[] or bigint[] literal for a parameter.
std::string array_literal(const std::vector<std::string>& items, bool quoted) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    if (!quoted) {
      out += items[i];
      continue;
    }
    out += '"';
    for (char c : items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

Status bad_reply(const char* what) {
  return {Errc::protocol_error, std::string("postgres: unexpected reply to ") + what};
}

std::string permits_text(std::int64_t permits) {
  return permits == 0 ? std::string("no limit (a read lock)") : std::to_string(permits);
}

// `call` names what a line's refusal says (kinds 4 and 5).
Result<AcquireOutcome> acquire_outcome(Result<Rows> r, const AcquireCall& call) {
  if (!r.ok()) return r.status();
  if (r->size() != 1 || r->front().size() != 4) return bad_reply("acquire");
  const Row& row = r->front();
  AcquireOutcome out;
  switch (to_int(row[0])) {
    case 1:
      out.kind = AcquireOutcome::Kind::granted;
      break;
    case 2:
      out.kind = AcquireOutcome::Kind::lost;
      break;
    case 3:
      out.kind = AcquireOutcome::Kind::mismatch;
      break;
    case 4:
      return Status(Errc::invalid_argument, "permits disagree: the lock is used with " + permits_text(to_int(row[2])) +
                                                " and this call asked for " + permits_text(call.permits));
    case 5:
      return Status(Errc::precondition_failed, std::string("this owner holds the lock ") +
                                                   (to_int(row[2]) == 1 ? "shared and asked for it exclusively"
                                                                        : "exclusively and asked for it shared") +
                                                   ": a change of mode would wait for itself (release first)");
    default: {
      out.kind = AcquireOutcome::Kind::busy;
      const std::int64_t ttl = to_int(row[3]);
      out.hint = ttl < 0 ? detail::WaitHint::event() : detail::WaitHint::expiry(milliseconds(ttl));
    }
  }
  out.fence = static_cast<std::uint64_t>(to_int(row[1]));
  out.depth = static_cast<unsigned>(to_int(row[2]));
  return out;
}

Result<ReleaseOutcome> release_outcome(Result<Rows> r) {
  if (!r.ok()) return r.status();
  if (r->size() != 1 || r->front().size() != 2) return bad_reply("release");
  ReleaseOutcome out;
  switch (to_int(r->front()[0])) {
    case 0:
      out.kind = ReleaseOutcome::Kind::released;
      break;
    case 1:
      out.kind = ReleaseOutcome::Kind::not_held;
      break;
    case 2:
      out.kind = ReleaseOutcome::Kind::not_owner;
      break;
    default:
      out.kind = ReleaseOutcome::Kind::mismatch;
  }
  out.depth = static_cast<unsigned>(to_int(r->front()[1]));
  return out;
}

// A call of the name's line: fair, shared or counted (core/lock_line.hpp).
bool is_line(const AcquireCall& call) { return call.queued || call.mode == LockMode::shared; }

std::string waiter_member(const std::string& client, std::uint64_t attempt) {
  return client + ':' + std::to_string(attempt);
}

// `queued`: whether a busy answer keeps a place in the line (the fast path's
// try without keep_place leaves nothing). `client`: this client's waiter id
// (a plain call that will wait joins the name's waiters; a line's waiter is
// told of its hand-over on the client's channel).
std::vector<std::string> acquire_params(const AcquireCall& call, bool queued, const std::string& client) {
  std::vector<std::string> p{call.name, call.owner, as_bigint(call.grant), std::to_string(call.held),
                             std::to_string(call.lease.count())};
  if (!is_line(call)) {
    p.push_back(call.info);
    p.push_back(call.waits ? waiter_member(client, call.attempt) : std::string());
    p.push_back(call.waited ? "true" : "false");
    return p;
  }
  p.push_back(call.mode == LockMode::shared ? "true" : "false");
  p.push_back(std::to_string(call.mode == LockMode::shared ? call.permits : 0));
  p.push_back(queued ? "true" : "false");
  p.push_back(call.info);
  p.push_back(client);  // its hand-over is told on this client's channel
  return p;
}

std::vector<std::string> release_params(const ReleaseCall& call) {
  return {call.name,
          call.owner,
          as_bigint(call.grant),
          std::to_string(call.held),
          call.all ? "true" : "false",
          std::to_string(call.tombstone.count())};
}

class PgBackend final : public detail::Backend {
 public:
  PgBackend(asio::io_context& io, PgBackendConfig config)
      : io_(io), config_(std::move(config)), conn_(io, config_.connection) {}
  ~PgBackend() override {
    if (sink_) hub_->leave(sink_);
  }

  detail::Capabilities capabilities() const override {
    detail::Capabilities caps;  // leases renewed, re-entry in the row
    caps.lines = true;
    return caps;
  }
  void set_events(detail::BackendEvents events) override { events_ = std::move(events); }

  // Creates the schema if missing and checks its version, then LISTENs.
  void start(std::function<void(Status)> done) override {
    conn_.query(create_schema_sql(config_.table), {}, [this, done = std::move(done)](Result<Rows> r) mutable {
      if (!r.ok()) return done(schema_failure(r.status()));
      conn_.query(schema_version_sql(config_.table), {}, [this, done = std::move(done)](Result<Rows> v) mutable {
        if (!v.ok()) return done(v.status());
        if (v->size() != 1 || to_int(v->front().at(0)) != kSchemaVersion)
          return done(Status(Errc::wrong_type, "the lock table " + config_.table.qualified() + " has schema version " +
                                                   (v->empty() ? "(none)" : *v->front().at(0)) + "; this dlock uses " +
                                                   std::to_string(kSchemaVersion)));
        hub_ = ListenHub::of(config_.connection, config_.backoff_min, config_.backoff_max);
        sink_ = hub_->join(
            io_, [this](const std::string& chan, const std::string& payload) { on_notify(chan, payload); },
            [this](Status s) { s.ok() ? listening_again() : listen_lost(); });
        // Ready once the LISTEN is in place (or failed: waiters then poll),
        // so the first waiters miss no release.
        listen_waiters_.push_back(
            [done = std::move(done)](Status s) mutable { done(s.code() == Errc::cancelled ? s : Status()); });
        start_listen();
      });
    });
  }

  void close() override {
    closed_ = true;
    unlisten_timer_.cancel();
    turns_.close();
    if (sink_) hub_->leave(std::exchange(sink_, nullptr));
    const Status closed(Errc::cancelled, "client closed");
    fail_table_waiters(closed);
    for (auto& w : std::exchange(listen_waiters_, {})) post(std::move(w), closed);
    conn_.close();
    std::unique_lock lk(fast_mu_);
    fast_closed_ = true;
    fast_idle_cv_.notify_all();  // releases waiting for a connection give up
    // A call on a caller's thread is bounded by the command timeout; the
    // backend outlives it.
    fast_idle_cv_.wait(lk, [this] { return fast_busy_ == 0; });
    fast_idle_.clear();
  }

  // The fast path: a fresh grant or a last release on the caller's thread,
  // through a blocking connection of the pool (a hop to the I/O thread
  // costs more than the round trip). Transient failures fall back to the
  // I/O thread's path, which retries; so does a call that finds every
  // pooled connection busy.
  std::optional<Result<AcquireOutcome>> acquire_now(const AcquireCall& call) override {
    if (call.lease.count() <= 0) return std::nullopt;
    // A try leaves no place in the line; a wait keeps it for the I/O
    // thread's attempts (same grant).
    const bool queued = call.queued && call.keep_place;
    auto out = with_blocking([&](PgBlocking& c) {
      ++commands_;
      return c.exec(is_line(call) ? line_acquire_sql(config_.table) : acquire_sql(config_.table),
                    acquire_params(call, queued, waiter_id_), call.deadline);
    });
    if (!out) return std::nullopt;
    return acquire_outcome(std::move(*out), call);
  }

  void open_blocking() override {
    with_blocking([](PgBlocking& c) {
      c.warm();
      return true;
    });
  }

  std::optional<Result<ReleaseOutcome>> release_now(const ReleaseCall& call) override {
    auto out = with_blocking(
        [&](PgBlocking& c) {
          ++commands_;
          return c.exec(release_sql_for(call), release_params(call));
        },
        true);
    if (!out) return std::nullopt;
    return release_outcome(std::move(*out));
  }

  void acquire(const AcquireCall& call, std::function<void(Result<AcquireOutcome>)> done) override {
    if (call.lease.count() <= 0) return post(std::move(done), Status(Errc::invalid_argument, "lease must be > 0"));
    ++commands_;
    conn_.query(is_line(call) ? line_acquire_sql(config_.table) : acquire_sql(config_.table),
                acquire_params(call, call.queued, waiter_id_),
                [call, done = std::move(done)](Result<Rows> r) { done(acquire_outcome(std::move(r), call)); });
  }

  void release(const ReleaseCall& call, std::function<void(Result<ReleaseOutcome>)> done) override {
    ++commands_;
    conn_.query(release_sql_for(call), release_params(call),
                [done = std::move(done)](Result<Rows> r) { done(release_outcome(std::move(r))); });
  }

  // A plain attempt leaves nothing in the table but a grant whose reply was
  // lost: undone exactly (owner, grant and level checked), and a stray copy
  // of its acquire still on its way is refused by the tombstone. An attempt
  // of a line (shared, or sent queued) may have left a place in it, or been
  // handed the lock: the line's abandon removes both, always.
  void abandon(const AbandonCall& call, std::function<void(Status)> done) override {
    if (call.waited && !call.line && call.mode == LockMode::exclusive) {
      // The undo first: its tombstone stops a copy of an attempt still on
      // its way (one on a dropped blocking connection may yet run), and
      // then the waiters are left (passing a wake-up it was sent on), so a
      // place such a copy took before the undo goes too.
      AbandonCall rest = call;
      rest.waited = false;
      return abandon(rest, [this, name = call.name, attempt = call.attempt, done = std::move(done)](Status s) mutable {
        if (!s.ok()) return done(s);
        leave(name, attempt, std::move(done));
      });
    }
    if (call.line || call.mode == LockMode::shared) {
      ++commands_;
      conn_.query(line_abandon_sql(config_.table),
                  {call.name, call.owner, as_bigint(call.grant), std::to_string(call.held),
                   std::to_string(call.tombstone.count())},
                  [done = std::move(done)](Result<Rows> r) { done(r.status()); });
      return;
    }
    auto undo = detail::undo_of(call);
    if (!undo) return post(std::move(done), Status());
    release(*undo, [done = std::move(done)](Result<ReleaseOutcome> r) { done(r.status()); });
  }

  void renew(const std::vector<RenewCall>& calls,
             std::function<void(Result<std::vector<RenewOutcome>>)> done) override {
    std::vector<std::string> names, owners, grants, leases, lines;
    bool any_line = false;
    for (const RenewCall& c : calls) {
      names.push_back(c.name);
      owners.push_back(c.owner);
      grants.push_back(as_bigint(c.grant));
      leases.push_back(std::to_string(c.lease.count()));
      const bool line = c.line || c.mode == LockMode::shared;
      lines.push_back(line ? "t" : "f");
      any_line = any_line || line;
    }
    std::vector<std::string> params{array_literal(names, true), array_literal(owners, true),
                                    array_literal(grants, false), array_literal(leases, false)};
    if (any_line) params.push_back(array_literal(lines, false));  // else the plain statement, as before lines
    ++commands_;
    conn_.query(
        any_line ? line_renew_sql(config_.table) : renew_sql(config_.table), std::move(params),
        [done = std::move(done), n = calls.size()](Result<Rows> r) {
          if (!r.ok()) return done(r.status());
          if (r->size() != n) return done(bad_reply("renew"));
          std::vector<RenewOutcome> out;
          for (const Row& row : *r) {
            const auto v = to_int(row.at(0));
            out.push_back(v == 1 ? RenewOutcome::renewed : v == 2 ? RenewOutcome::taken : RenewOutcome::expired);
          }
          done(std::move(out));
        });
  }

  void inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) override {
    ++commands_;
    conn_.query(inspect_sql(config_.table), {name}, [done = std::move(done)](Result<Rows> r) {
      if (!r.ok()) return done(r.status());
      if (r->size() != 1 || r->front().size() != 10) return done(bad_reply("inspect"));
      const Row& row = r->front();
      LockInfo info;
      info.last_fence = static_cast<std::uint64_t>(to_int(row[0]));
      const auto waiters = static_cast<unsigned>(to_int(row[7]));
      if (row[1]) {
        info.held = true;
        info.fence = static_cast<std::uint64_t>(to_int(row[1]));
        info.reentry_count = static_cast<unsigned>(to_int(row[2]));
        info.remaining = milliseconds(to_int(row[3]));
        info.holder = row[4].value_or("");
        info.shared = row[5] && *row[5] == "t";
        info.holders = static_cast<unsigned>(to_int(row[6]));
        if (row[8]) info.held_for = milliseconds(to_int(row[8]));
      }
      info.waiters = waiters;  // the line's and the queued plain ones
      done(info);
    });
  }

  void names(const std::string& prefix, std::function<void(Result<std::vector<std::string>>)> done) override {
    ++commands_;
    conn_.query(names_sql(config_.table), {prefix}, [done = std::move(done)](Result<Rows> r) {
      if (!r.ok()) return done(r.status());
      std::vector<std::string> out;
      for (const Row& row : *r)
        if (!row.empty() && row[0]) out.push_back(*row[0]);
      done(std::move(out));
    });
  }

  // A plain waiter is woken on this client's own channel, LISTENed from
  // the start, and a line's waiter is told of its hand-over there; an
  // observer hears the table's channel, LISTENed only while one watches
  // (every client listening to it hears every release of every name).
  // Ready at once while the LISTEN is in place; otherwise the waiter is
  // told (it then polls, each wait capped at the holder's lease).
  void watch(const WatchKey& key, std::function<void(Status)> ready) override {
    if (!key.broadcast || key.attempt != 0) {  // a plain waiter, or a line's (its hand-over)
      if (!key.broadcast) turns_.add(key.name, key.attempt);
      if (listen_pending_) return listen_waiters_.push_back(std::move(ready));
      return post(std::move(ready), listening_ ? Status() : not_listening());
    }
    ++watches_[key.name];
    ++broadcast_;
    unlisten_timer_.cancel();
    if (!table_on_ && listening_) listen_table();
    if (listen_pending_ || table_pending_ > 0) return table_waiters_.push_back(std::move(ready));
    post(std::move(ready), listening_ ? Status() : not_listening());
  }
  void unwatch(const WatchKey& key) override {
    if (!key.broadcast || key.attempt != 0) {
      if (!key.broadcast) turns_.remove(key.name, key.attempt);
      return;
    }
    auto it = watches_.find(key.name);
    if (it != watches_.end() && --it->second <= 0) watches_.erase(it);
    if (--broadcast_ > 0) return;
    // Kept a while: a fair lock's loop would LISTEN and UNLISTEN per turn.
    unlisten_timer_.expires_after(kUnlistenAfter);
    unlisten_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || closed_ || broadcast_ > 0 || !table_on_) return;
      table_on_ = false;
      ++commands_;
      hub_->unlisten(sink_, channel(config_.table));
    });
  }

  std::uint64_t commands_sent() const override { return commands_.load(std::memory_order_relaxed); }
  std::uint64_t reconnects() const override { return conn_.reconnects() + (hub_ ? hub_->reconnects() : 0); }

 private:
  const std::string& release_sql_for(const ReleaseCall& call) const {
    return call.mode == LockMode::shared ? line_release_sql_ : release_sql_;
  }

  // A release's payload is the name; a hand-over's names its recipient
  // (the lock is held again: nobody else is woken), on the recipient's
  // client's channel; "\x1fc<name>" says the holder changed without a
  // release (observers only).
  void on_notify(const std::string& chan, const std::string& payload) {
    HandOverPayload h;
    if (chan == own_channel_) {
      if (!parse_hand_over(payload, h)) return on_waiter_notify(payload);
      if (events_.handed) events_.handed({h.name, h.owner, h.grant, h.fence, milliseconds(h.lease_ms)});
      return;
    }
    if (parse_hand_over(payload, h)) {
      // Held again: nobody else is woken, but the other waiters look again
      // by the grant's lease (its recipient may have died).
      if (events_.handed) events_.handed({h.name, h.owner, h.grant, h.fence, milliseconds(h.lease_ms)});
    } else if (payload.size() > 2 && payload[0] == '\x1f' && payload[1] == 'c') {  // a free lock granted
      if (events_.changed) events_.changed(payload.substr(2));
    }
    // A name that merely looks like a hand-over is still a name.
    if (watches_.count(payload) && events_.released) events_.released({payload, 0});
  }

  // Runs f(connection) with a pooled blocking connection taken for the
  // call, so callers on several threads run their statements at once
  // (one shared connection made PostgreSQL's W2 one connection's rate).
  // nullopt: closed, or every one of kMaxBlocking connections is busy and
  // `wait` is false (an acquire then goes through the I/O thread). A
  // release waits for one: once its hold is claimed for the fast path, it
  // must go out here (a release not sent left the lock held for a lease).
  template <class F>
  auto with_blocking(F f, bool wait = false) -> std::optional<decltype(f(std::declval<PgBlocking&>()))> {
    std::unique_ptr<PgBlocking> c;
    {
      std::unique_lock lk(fast_mu_);
      if (wait)
        fast_idle_cv_.wait(lk, [&] { return fast_closed_ || !fast_idle_.empty() || fast_busy_ < kMaxBlocking; });
      if (fast_closed_) return std::nullopt;
      if (!fast_idle_.empty()) {
        c = std::move(fast_idle_.back());
        fast_idle_.pop_back();
      } else if (fast_busy_ < kMaxBlocking) {
        c = std::make_unique<PgBlocking>(config_.connection);
      } else {
        return std::nullopt;
      }
      ++fast_busy_;
    }
    auto out = f(*c);
    std::lock_guard lk(fast_mu_);
    --fast_busy_;
    if (!fast_closed_) fast_idle_.push_back(std::move(c));
    fast_idle_cv_.notify_all();
    return out;
  }

  template <class Done, class Value>
  void post(Done done, Value value) {
    asio::post(io_, [done = std::move(done), value = std::move(value)]() mutable { done(std::move(value)); });
  }

  Status schema_failure(const Status& s) {
    if (s.code() != Errc::permission_denied) return s;
    return {s.code(), s.message() + " (the role cannot create the lock table: run `dlock migrate URL` as one that can)",
            s.backend_code()};
  }

  static Status not_listening() { return Status(Errc::unavailable, "postgres: not listening for releases"); }

  // This client's channel, through the process's LISTEN connection (the
  // hub LISTENs to it again after a reconnect, and says so).
  void start_listen() {
    listen_pending_ = true;
    ++commands_;
    hub_->listen(sink_, own_channel_, [this](Status r) {
      listen_pending_ = false;
      const Status s =
          r.ok() ? Status() : Status(Errc::unavailable, "postgres: not listening for releases: " + r.message());
      for (auto& w : std::exchange(listen_waiters_, {})) post(std::move(w), s);
      if (r.ok()) listening_again();  // else the hub tells once it listens again
    });
  }

  // Every channel of this client is LISTENed to (again); the table's is
  // asked for if someone started watching meanwhile.
  void listening_again() {
    if (closed_) return;
    listening_ = true;
    if (broadcast_ > 0 && !table_on_)
      listen_table();
    else if (table_pending_ == 0)
      fail_table_waiters(Status());
    // Releases while nobody listened are lost: every waiter retries once.
    if (events_.resync) events_.resync();
  }

  // The waiters are told once the newest LISTEN is in (one behind an
  // UNLISTEN must not take an older LISTEN's answer for its own).
  void listen_table() {
    table_on_ = true;
    ++table_pending_;
    ++commands_;
    hub_->listen(sink_, channel(config_.table), [this](Status r) {
      if (--table_pending_ > 0) return;
      fail_table_waiters(r.ok() ? Status()
                                : Status(Errc::unavailable, "postgres: not listening for releases: " + r.message()));
    });
  }

  // The table's watchers waiting for its LISTEN are told how it went.
  void fail_table_waiters(const Status& s) {
    auto waiters = std::move(table_waiters_);
    table_waiters_.clear();
    for (auto& w : waiters) post(std::move(w), s);
  }

  // "\x1fw<attempt>:<name>": this client's waiter's turn; "\x1fs<attempt>:
  // <ms>:<name>": stand by (waiter_turns.hpp says what each does).
  void on_waiter_notify(const std::string& payload) {
    detail::WaiterTurns::Message m;
    if (payload.empty() || payload[0] != '\x1f' || !detail::WaiterTurns::parse(std::string_view(payload).substr(1), m))
      return;
    turns_.deliver(m);
  }

  void leave(const std::string& name, std::uint64_t attempt, std::function<void(Status)> done) {
    ++commands_;
    conn_.query(leave_sql(config_.table), {name, waiter_member(waiter_id_, attempt)},
                [done = std::move(done)](Result<Rows> r) { done(r.status()); });
  }

  // The hub's connection dropped; it LISTENs again with backoff.
  void listen_lost() {
    listening_ = false;
    if (events_.resync) events_.resync();
  }

  asio::io_context& io_;
  PgBackendConfig config_;
  PgConnection conn_;  // the calls
  std::shared_ptr<ListenHub> hub_;
  std::shared_ptr<ListenHub::Sink> sink_;  // this client in the hub; null once closed
  detail::BackendEvents events_;
  std::map<std::string, int> watches_;  // the table channel's, by name
  int broadcast_ = 0;                   // watches of the table channel
  int table_pending_ = 0;               // its LISTENs on their way
  bool table_on_ = false;               // LISTENed (or on its way), not UNLISTENed
  asio::steady_timer unlisten_timer_{io_};
  static constexpr std::chrono::seconds kUnlistenAfter{2};
  std::vector<std::function<void(Status)>> table_waiters_;
  // This client's id among a name's waiters (its channel: dlockw_<id>),
  // and its plain waiters, woken on own_channel_.
  const std::string waiter_id_ = detail::random_hex16();
  const std::string own_channel_ = waiter_channel(waiter_id_);
  detail::WaiterTurns turns_{
      io_,
      [this](const std::string& name, std::uint64_t attempt) {
        if (events_.released) events_.released({name, attempt});
      },
      [this](const std::string& name, std::uint64_t attempt) { leave(name, attempt, [](Status) {}); }};
  std::atomic<std::uint64_t> commands_{0};
  static constexpr int kMaxBlocking = 8;
  std::mutex fast_mu_;
  std::condition_variable fast_idle_cv_;
  std::vector<std::unique_ptr<PgBlocking>> fast_idle_;  // guarded by fast_mu_
  int fast_busy_ = 0;                                   // guarded by fast_mu_: taken by callers
  bool fast_closed_ = false;                            // guarded by fast_mu_
  bool listening_ = false;
  bool listen_pending_ = false;                              // a LISTEN is on its way
  std::vector<std::function<void(Status)>> listen_waiters_;  // watches (and start) waiting for it
  bool closed_ = false;
  const std::string release_sql_ = release_sql(config_.table);
  const std::string line_release_sql_ = line_release_sql(config_.table);
};

}  // namespace

std::unique_ptr<detail::Backend> make_pg_backend(asio::io_context& io, PgBackendConfig config) {
  return std::make_unique<PgBackend>(io, std::move(config));
}

}  // namespace dlock::postgres

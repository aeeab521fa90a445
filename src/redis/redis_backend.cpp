#include <algorithm>
#include <boost/asio/post.hpp>

#include "core/token.hpp"
#include "redis/errors.hpp"
#include "redis/keys.hpp"
#include "redis/line_scripts.hpp"
#include "redis/redis_backend_impl.hpp"
#include "redis/tls.hpp"

namespace dlock::redis {

RedisBackend::RedisBackend(boost::asio::io_context& io, std::unique_ptr<Route> route, ConnectionConfig config,
                           std::string prefix, ReplicaWait wait)
    : io_(io),
      route_(std::move(route)),
      config_(std::move(config)),
      prefix_(std::move(prefix)),
      wait_(wait),
      keyspace_{prefix_, route_->moves() ? detail::FenceScope::name : detail::FenceScope::prefix,
                config_.endpoint.layout},
      resubscribe_timer_(io),
      waiter_id_(detail::random_token()),
      turns_(
          io,
          [this](const std::string& name, std::uint64_t attempt) {
            if (events_.released) events_.released({name, attempt});
          },
          [this](const std::string& name, std::uint64_t attempt) { leave(name, attempt, [](Status) {}); }) {
  // TLS on the fast path: one context for its connections, made as the
  // I/O thread's are. Without it (a file that cannot be loaded) the I/O
  // path reports why at connect.
  if (config_.endpoint.tls)
    if (auto ctx = make_client_tls_context(config_.endpoint); ctx.ok()) tls_ctx_ = std::move(ctx.value());
}

void RedisBackend::start(std::function<void(Status)> done) {
  route_->on_link([this](bool up) {
    if (events_.link) events_.link(up);
  });
  route_->start([this, done = std::move(done)](Status s) mutable {
    const std::string& mode = config_.endpoint.pubsub;
    if (!s.ok() || !route_->cluster() || mode == "classic") return done(s);
    probe_sharded(mode == "sharded", std::move(done));
  });
}

void RedisBackend::probe_sharded(bool required, std::function<void(Status)> done) {
  std::vector<std::string> probe{command({"COMMAND", "INFO", "SSUBSCRIBE"})};
  route_->exec(Route::kSubscriberSlot, std::move(probe),
               [this, required, done = std::move(done)](Status s, std::vector<Reply>&& r) {
                 if (!s.ok()) return done(s);
                 const Reply& info = r.front();
                 const bool unknown = info.type == Reply::Type::array &&
                                      (info.elements.empty() || info.elements[0].type == Reply::Type::nil);
                 sharded_ = !unknown;
                 if (!unknown || !required) return done({});
                 done(Status(Errc::invalid_argument,
                             "pubsub=sharded needs Redis 7 or later: the cluster does not know SSUBSCRIBE "
                             "(pubsub=auto falls back to classic pub/sub)"));
               });
}

void RedisBackend::close() {
  closed_ = true;
  resubscribe_timer_.cancel();
  route_->close();
  for (auto& [node, sub] : subs_) sub->close();
  for (auto& r : retired_) r->close();
  fail_ready(Status(Errc::cancelled, "client closed"));
  watches_.clear();
  turns_.close();
}

detail::Capabilities RedisBackend::capabilities() const {
  detail::Capabilities caps;
  // The plain and redisson layouts keep what their peers keep: the client
  // counts re-entry (redisson: dlock's field counts 1), and there is no line.
  caps.lines = !keyspace_.single_key();
  caps.server_reentry = !keyspace_.single_key();
  return caps;
}

void RedisBackend::acquire_round(const AcquireCall& call, std::uint64_t round,
                                 std::function<void(Result<AcquireOutcome>)> done) {
  if (Status bad = check_layout(call); !bad.ok())
    return boost::asio::post(io_, [done = std::move(done), bad] { done(bad); });
  ScriptCall sc = acquire_request(keyspace_, call, call.queued, round, member_of(call, round));
  if (wait_.replicas > 0) {
    return eval_script(*sc.script, sc.keys, sc.args, true,
                       [this, call, done = std::move(done)](Result<Reply> r, Status replicated) mutable {
                         if (!r.ok()) return done(keyed(r.status(), call.name));
                         auto out = parse_acquire(*r, call);
                         if (out.ok() && out->kind == AcquireOutcome::Kind::granted && !replicated.ok())
                           return undo_unreplicated(call, replicated, std::move(done));
                         done(std::move(out));
                       });
  }
  eval(*sc.script, sc.keys, sc.args, [this, call, done = std::move(done)](Result<Reply> r) {
    if (!r.ok()) return done(keyed(r.status(), call.name));
    done(parse_acquire(*r, call));
  });
}

Status RedisBackend::keyed(const Status& s, const std::string& name) const {
  if (s.code() != Errc::wrong_type || s.message().find("fence counter") != std::string::npos) return s;
  // Redis's own text names neither the key nor the lock (only the script's
  // hash and line).
  const std::string key = keyspace_.keys(name).lock;
  return Status(Errc::wrong_type,
                "lock '" + name + "': the key " + key + " holds another Redis type, not a lock of this layout (" +
                    (keyspace_.plain() ? "a string" : "a hash") + "); it was left alone: use another name",
                s.backend_code());
}

Status RedisBackend::check_layout(const AcquireCall& call) const {
  if (keyspace_.single_key() && detail::own_key(keyspace_.prefix, call.name))
    return Status(Errc::invalid_argument,
                  "lock name '" + call.name + "' is a key dlock keeps for itself under key_prefix '" +
                      keyspace_.prefix + "' (its fence counter, or a lock or side key of the default layout); " +
                      "the plain and redisson layouts lock the key named like the lock: choose another name");
  if (keyspace_.redisson())
    return detail::check_mode(call, "layout=redisson",
                              "it keeps Redisson's RLock, one hash per lock, and no line (use the default layout, "
                              "or another backend, for them)");
  if (!keyspace_.plain()) return {};
  return detail::check_mode(call, "layout=plain",
                            "it keeps one string key per lock, as redis-py's Lock and npm redlock do, and no line "
                            "(use the default layout, or another backend, for them)");
}

void RedisBackend::release_round(const ReleaseCall& call, std::uint64_t round,
                                 std::function<void(Result<ReleaseOutcome>)> done) {
  ScriptCall sc = release_request(keyspace_, call, round);
  eval(*sc.script, sc.keys, sc.args, [done = std::move(done)](Result<Reply> r) {
    if (!r.ok()) return done(r.status());
    done(parse_release(*r));
  });
}

void RedisBackend::abandon(const detail::AbandonCall& call, std::function<void(Status)> done) {
  if (call.waited && !call.line && call.mode == detail::LockMode::exclusive && wake_one()) {
    // Out of the waiters first (passing a wake-up it was sent on), then
    // whatever the attempts may have left.
    detail::AbandonCall rest = call;
    rest.waited = false;
    return leave(call.name, call.attempt, [this, rest, done = std::move(done)](Status s) mutable {
      if (!s.ok()) return done(s);
      abandon(rest, std::move(done));
    });
  }
  if (call.line || call.mode == detail::LockMode::shared) {
    // Always: a place in the line, or a hand-over it never heard of.
    ScriptCall sc = abandon_request(keyspace_, call);
    return eval(*sc.script, sc.keys, sc.args, [done = std::move(done)](Result<Reply> r) { done(r.status()); });
  }
  auto undo = detail::undo_of(call);
  if (!undo) return boost::asio::post(io_, [done = std::move(done)] { done({}); });
  release(*undo, [done = std::move(done)](Result<ReleaseOutcome> r) { done(r.status()); });
}

void RedisBackend::renew(const std::vector<RenewCall>& calls,
                         std::function<void(Result<std::vector<RenewOutcome>>)> done) {
  if (calls.empty()) return boost::asio::post(io_, [done = std::move(done)] { done(std::vector<RenewOutcome>{}); });
  std::map<int, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < calls.size(); ++i)
    groups[route_->cluster() ? key_slot(keyspace_.keys(calls[i].name).lock) : -1].push_back(i);
  auto batch = std::make_shared<RenewBatch>();
  batch->out.assign(calls.size(), RenewOutcome::unconfirmed);
  batch->groups_left = groups.size();
  batch->done = std::move(done);
  for (auto& [slot, indexes] : groups) renew_group(calls, std::move(indexes), batch);
}

void RedisBackend::names(const std::string& prefix, std::function<void(Result<std::vector<std::string>>)> done) {
  auto scan = std::make_shared<Scan>();
  scan->pattern =
      keyspace_.single_key() ? detail::plain_key_pattern(prefix) : detail::lock_key_pattern(prefix_, prefix);
  scan->masters = route_->masters();
  scan->done = std::move(done);
  scan_page(scan, "0");
}

void RedisBackend::scan_page(std::shared_ptr<Scan> scan, const std::string& cursor) {
  // The plain layout: every string key may be a lock (a peer's too), but
  // for dlock's own (its fence counter, tombstones); the redisson layout:
  // every hash.
  const bool plain = keyspace_.single_key();
  std::vector<std::string_view> scan_args{"SCAN", cursor, "MATCH", scan->pattern, "COUNT", "1000"};
  if (plain) scan_args.insert(scan_args.end(), {"TYPE", keyspace_.redisson() ? "hash" : "string"});
  std::string payload;
  append_command(payload, scan_args);
  std::vector<std::string> commands;
  commands.push_back(std::move(payload));
  route_->exec_at(
      scan->masters.front(), std::move(commands), [this, scan, plain](Status s, std::vector<Reply>&& replies) {
        if (!s.ok()) return scan->done(s);
        const Reply& r = replies[0];
        if (r.is_error()) return scan->done(translate_error(r.str));
        if (r.type != Reply::Type::array || r.elements.size() != 2 || r.elements[1].type != Reply::Type::array)
          return scan->done(unexpected_reply("SCAN", r));
        for (const Reply& key : r.elements[1].elements) {
          if (plain) {
            if (!detail::own_key(prefix_, key.str)) scan->found.push_back(key.str);  // a peer's "dlock:deploy" too
          } else if (std::string name = detail::name_of_key(prefix_, key.str); !name.empty()) {
            scan->found.push_back(std::move(name));
          }
        }
        if (r.elements[0].str != "0") return scan_page(scan, r.elements[0].str);
        scan->masters.erase(scan->masters.begin());
        if (!scan->masters.empty()) return scan_page(scan, "0");
        // A name has several keys (lock, line, tombstones): once each.
        std::sort(scan->found.begin(), scan->found.end());
        scan->found.erase(std::unique(scan->found.begin(), scan->found.end()), scan->found.end());
        scan->done(std::move(scan->found));
      });
}

void RedisBackend::inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) {
  auto keys = keyspace_.keys(name);
  const Script& script = published(keyspace_.plain()      ? plain_inspect_script()
                                   : keyspace_.redisson() ? redisson_inspect_script()
                                                          : line_inspect_script());
  std::vector<std::string> commands(3);
  if (keyspace_.single_key())
    append_command(commands[0], {"EVAL", script.body, "1", keys.lock});
  else
    append_command(commands[0], {"EVAL", script.body, "3", keys.lock, keys.line, keys.fence, keys.channel});
  append_command(commands[1], {"GET", keys.fence});
  append_command(commands[2], {"PUBSUB", sharded_ ? "SHARDNUMSUB" : "NUMSUB", keys.channel});
  const int slot = slot_of(keys.lock);
  // Sharded, the waiters subscribe on the lock's own node.
  if (!route_->cluster() || sharded_) return route_->exec(slot, std::move(commands), inspected(std::move(done)));
  // Classic, in a cluster the subscribers are counted where they subscribe.
  std::vector<std::string> numsub;
  numsub.push_back(std::move(commands[2]));
  commands.pop_back();
  route_->exec(slot, std::move(commands),
               [this, numsub = std::move(numsub), done = std::move(done)](Status s, std::vector<Reply>&& r) mutable {
                 if (!s.ok()) return done(s);
                 route_->exec(
                     Route::kSubscriberSlot, std::move(numsub),
                     [r = std::move(r), done = std::move(done), this](Status s2, std::vector<Reply>&& r2) mutable {
                       if (!s2.ok()) return done(s2);
                       r.push_back(std::move(r2.front()));
                       inspected(std::move(done))({}, std::move(r));
                     });
               });
}

ReplyHandler RedisBackend::inspected(std::function<void(Result<LockInfo>)> done) {
  return [done = std::move(done)](Status s, std::vector<Reply>&& replies) {
    if (!s.ok()) return done(s);
    for (const Reply& r : replies)
      if (r.is_error()) return done(translate_error(r.str));
    const Reply& f = replies[0];
    long long is_line = 0, held = 0, fence = 0, depth = 0, left = 0, holders = 0, shared = 0, line = 0, since = -1;
    if (f.type != Reply::Type::array || f.elements.size() != 10 || !int_at(f, 0, is_line) || !int_at(f, 1, held) ||
        !int_at(f, 2, fence) || !int_at(f, 3, depth) || !int_at(f, 4, left) ||
        f.elements[5].type != Reply::Type::string || !int_at(f, 6, holders) || !int_at(f, 7, shared) ||
        !int_at(f, 8, line) || !int_at(f, 9, since))
      return done(unexpected_reply("the inspect script", f));
    LockInfo info;
    info.held = held != 0;
    info.fence = static_cast<std::uint64_t>(fence);
    info.reentry_count = static_cast<unsigned>(depth);
    info.remaining = milliseconds(info.held ? left : 0);
    info.holder = f.elements[5].str;
    if (info.held && since >= 0) info.held_for = milliseconds(since);
    info.holders = static_cast<unsigned>(holders);
    info.shared = shared != 0;
    info.last_fence = replies[1].type == Reply::Type::string ? std::strtoull(replies[1].str.c_str(), nullptr, 10) : 0;
    const Reply& numsub = replies[2];
    // Not a line's: the queued plain waiters (the default layout) and the
    // channel's listeners (the single-key layouts' waiters).
    auto waiters = static_cast<unsigned>(line);
    if (is_line == 0 && numsub.type == Reply::Type::array && numsub.elements.size() == 2)
      waiters += static_cast<unsigned>(numsub.elements[1].integer);
    info.waiters = waiters;
    done(info);
  };
}

std::uint64_t RedisBackend::commands_sent() const {
  std::uint64_t n = route_->requests_sent() + sync_sent_.load();
  for (const auto& [node, sub] : subs_) n += sub->requests_sent();
  return n;
}

std::uint64_t RedisBackend::reconnects() const {
  std::uint64_t n = route_->reconnects();
  for (const auto& [node, sub] : subs_) n += sub->reconnects();
  return n;
}

void RedisBackend::renew_group(const std::vector<RenewCall>& calls, std::vector<std::size_t> indexes,
                               std::shared_ptr<RenewBatch> batch) {
  std::vector<std::string> keys, args;
  keys.reserve(indexes.size());
  args.reserve(indexes.size() * 3);
  for (std::size_t i : indexes) {
    const RenewCall& c = calls[i];
    auto k = keyspace_.keys(c.name);
    keys.push_back(std::move(k.lock));
    if (c.line) keys.push_back(std::move(k.line));
    args.push_back(wire_owner(c.owner, c.grant));
    args.push_back(std::to_string(c.lease.count()));
    args.push_back(keyspace_.plain() ? "k" : keyspace_.redisson() ? "h" : c.line ? "l" : "p");
  }
  // Renewals the replicas did not acknowledge could vanish in a failover:
  // unconfirmed (retried next tick). Leases found gone or taken are
  // reported as such all the same.
  auto parse = [indexes = std::move(indexes), batch](Result<Reply> r, const Status& replicated) {
    if (!r.ok()) return batch->group_done(r.status());
    if (r->type != Reply::Type::array || r->elements.size() != indexes.size())
      return batch->group_done(unexpected_reply("the renew script", *r));
    for (std::size_t k = 0; k < indexes.size(); ++k) {
      RenewOutcome& o = batch->out[indexes[k]];
      switch (r->elements[k].integer) {
        case 1:
          o = replicated.ok() ? RenewOutcome::renewed : RenewOutcome::unconfirmed;
          break;
        case 2:
          o = RenewOutcome::taken;
          break;
        case 3:
          o = RenewOutcome::wrong_type;
          break;
        default:
          o = RenewOutcome::expired;
      }
    }
    batch->group_done({});
  };
  if (wait_.replicas > 0) return eval_script(renew_script(), keys, args, true, std::move(parse));
  eval(renew_script(), keys, args, [parse = std::move(parse)](Result<Reply> r) { parse(std::move(r), Status()); });
}

void RedisBackend::eval(const Script& original, const std::vector<std::string>& keys,
                        const std::vector<std::string>& args, std::function<void(Result<Reply>)> done) {
  eval_script(original, keys, args, false,
              [done = std::move(done)](Result<Reply> r, const Status&) { done(std::move(r)); });
}

void RedisBackend::eval_script(const Script& original, const std::vector<std::string>& keys,
                               const std::vector<std::string>& args, bool waited,
                               std::function<void(Result<Reply>, Status)> done) {
  const Script& script = published(original);
  std::vector<std::string> commands(waited ? 2 : 1);
  commands[0] = eval_payload("EVALSHA", script.sha1, keys, args);
  if (waited) append_wait(commands[1]);
  run_eval(slot_of(keys.front()), script, std::move(commands), std::move(done), false);
}

void RedisBackend::run_eval(int slot, const Script& script, std::vector<std::string> commands,
                            std::function<void(Result<Reply>, Status)> done, bool fallback) {
  const bool waited = commands.size() == 2;
  // Kept for a NOSCRIPT answer: the request's few bytes, not the body.
  std::string sent = fallback ? std::string() : commands[0];
  auto handler = [this, slot, &script, sent = std::move(sent), waited, fallback, done = std::move(done)](
                     Status s, std::vector<Reply>&& rs) mutable {
    if (!s.ok()) return done(s, s);
    if (!fallback && rs[0].is_error() && rs[0].str.starts_with("NOSCRIPT")) {
      std::vector<std::string> again(waited ? 2 : 1);
      again[0] = as_eval(sent, script);
      if (waited) append_wait(again[1]);
      return run_eval(slot, script, std::move(again), std::move(done), true);
    }
    Result<Reply> out = rs[0].is_error() ? Result<Reply>(translate_error(rs[0].str)) : std::move(rs[0]);
    done(std::move(out), waited ? replication_of(rs[1]) : Status());
  };
  route_->exec(slot, std::move(commands), std::move(handler),
               waited ? wait_.timeout + config_.command_timeout : milliseconds(0));
}

void RedisBackend::undo_unreplicated(const AcquireCall& call, const Status& why,
                                     std::function<void(Result<AcquireOutcome>)> done) {
  release(undo_of_grant(call),
          [why, done = std::move(done)](Result<ReleaseOutcome> r) mutable { done(unreplicated(why, r)); });
}

ReleaseCall RedisBackend::undo_of_grant(const AcquireCall& call) {
  ReleaseCall undo{call.name, call.owner, call.held + 1, false};
  undo.grant = call.grant;
  undo.mode = call.mode;
  return undo;
}

Status RedisBackend::unreplicated(const Status& why, const Result<ReleaseOutcome>& undone) {
  if (undone.ok() && (undone->kind == ReleaseOutcome::Kind::released || undone->kind == ReleaseOutcome::Kind::not_held))
    return Status(why.code(), "grant " + why.message() + "; it was released");
  return Status(Errc::outcome_unknown,
                "grant " + why.message() + "; releasing it failed too (" +
                    (undone.ok() ? std::string("not the owner's any more") : undone.status().to_string()) + ")");
}

Status RedisBackend::replication_of(const Reply& w) const {
  if (w.is_error()) return translate_error(w.str);
  if (w.type != Reply::Type::integer) return unexpected_reply("WAIT", w);
  if (w.integer >= wait_.replicas) return {};
  return Status(Errc::unavailable, "not replicated to " + std::to_string(wait_.replicas) +
                                       " replica(s): " + std::to_string(w.integer) + " acknowledged within " +
                                       std::to_string(wait_.timeout.count()) + " ms");
}

std::unique_ptr<detail::Backend> make_redis_backend(boost::asio::io_context& io, ConnectionConfig config,
                                                    std::string key_prefix, ReplicaWait wait) {
  auto route = make_single_route(io, config);
  return std::make_unique<RedisBackend>(io, std::move(route), std::move(config), std::move(key_prefix), wait);
}

std::unique_ptr<RedlockMaster> make_redlock_master(boost::asio::io_context& io, ConnectionConfig config,
                                                   std::string key_prefix) {
  auto route = make_single_route(io, config);
  auto master =
      std::make_unique<RedisBackend>(io, std::move(route), std::move(config), std::move(key_prefix), ReplicaWait{});
  master->wake_all_waiters();
  return master;
}

std::unique_ptr<detail::Backend> make_redis_cluster_backend(boost::asio::io_context& io,
                                                            std::vector<ConnectionConfig> seeds, std::string key_prefix,
                                                            ReplicaWait wait) {
  ConnectionConfig first = seeds.front();
  auto route = make_cluster_route(io, std::move(seeds));
  return std::make_unique<RedisBackend>(io, std::move(route), std::move(first), std::move(key_prefix), wait);
}

std::unique_ptr<detail::Backend> make_redis_sentinel_backend(boost::asio::io_context& io,
                                                             std::vector<ConnectionConfig> sentinels,
                                                             ConnectionConfig master, std::string master_name,
                                                             std::string key_prefix, ReplicaWait wait) {
  ConnectionConfig first = master;
  auto route = make_sentinel_route(io, std::move(sentinels), std::move(master), std::move(master_name));
  return std::make_unique<RedisBackend>(io, std::move(route), std::move(first), std::move(key_prefix), wait);
}

}  // namespace dlock::redis

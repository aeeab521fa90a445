#include "redis/redis_backend.hpp"

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <mutex>
#include <optional>

#include "redis/cluster_map.hpp"
#include "redis/errors.hpp"
#include "redis/keys.hpp"
#include "redis/line_scripts.hpp"
#include "redis/route.hpp"
#include "redis/scripts.hpp"
#include "redis/subscriber.hpp"
#include "redis/sync_connection.hpp"
#include "redis/tls.hpp"

namespace dlock::redis {
namespace {

using detail::AcquireCall;
using detail::AcquireOutcome;
using detail::ReleaseCall;
using detail::ReleaseOutcome;
using detail::RenewCall;
using detail::RenewOutcome;

// What the scripts store as the owner: one grant of one owner,
// "<owner>/<grant>" with the grant id in base64url (at most 11 characters:
// every held lock stores it, so its length is Redis memory).
std::string wire_owner(const std::string& owner, std::uint64_t grant) {
  if (grant == 0) return owner;
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve(owner.size() + 12);
  out += owner;
  out += '/';
  do {
    out += kAlphabet[grant & 63];
    grant >>= 6;
  } while (grant != 0);
  return out;
}

// wire_owner's inverse: "<owner>/<grant>" back into owner and grant.
bool split_wire_owner(std::string_view wire, std::string& owner, std::uint64_t& grant) {
  const auto slash = wire.rfind('/');
  if (slash == std::string_view::npos) return false;
  std::uint64_t g = 0;
  unsigned shift = 0;
  for (char c : wire.substr(slash + 1)) {
    unsigned v;
    if (c >= 'A' && c <= 'Z')
      v = static_cast<unsigned>(c - 'A');
    else if (c >= 'a' && c <= 'z')
      v = static_cast<unsigned>(c - 'a') + 26;
    else if (c >= '0' && c <= '9')
      v = static_cast<unsigned>(c - '0') + 52;
    else if (c == '-')
      v = 62;
    else if (c == '_')
      v = 63;
    else
      return false;
    if (shift >= 64) return false;
    g |= static_cast<std::uint64_t>(v) << shift;
    shift += 6;
  }
  if (shift == 0) return false;
  owner.assign(wire.substr(0, slash));
  grant = g;
  return true;
}

// A line's call (core/lock_line.hpp): fair or shared.
bool is_line(const AcquireCall& call) { return call.queued || call.mode == detail::LockMode::shared; }

bool int_at(const Reply& r, std::size_t i, long long& out) {
  if (r.type != Reply::Type::array || r.elements.size() <= i || r.elements[i].type != Reply::Type::integer)
    return false;
  out = r.elements[i].integer;
  return true;
}

// One script invocation: which script, its keys and arguments.
struct ScriptCall {
  const Script* script;
  std::vector<std::string> keys;
  std::vector<std::string> args;
};

// `queued`: the line keeps the caller's place when busy (false: try once).
ScriptCall acquire_request(const std::string& prefix, detail::FenceScope fences, const AcquireCall& call, bool queued) {
  auto keys = detail::lock_keys(prefix, call.name, fences);
  std::string owner = wire_owner(call.owner, call.grant);
  std::string tomb = keys.lock + ":t:" + owner;
  if (is_line(call)) {
    return {&line_acquire_script(),
            {std::move(keys.lock), std::move(keys.fence), std::move(tomb), std::move(keys.line)},
            {std::move(owner), std::to_string(call.lease.count()), std::to_string(call.held),
             call.mode == detail::LockMode::shared ? "s" : "x", std::to_string(call.permits), queued ? "1" : "0",
             call.info, std::move(keys.channel)}};
  }
  return {&acquire_script(),
          {std::move(keys.lock), std::move(keys.fence), std::move(tomb), std::move(keys.line)},
          {std::move(owner), std::to_string(call.lease.count()), std::to_string(call.held), std::to_string(call.round),
           std::move(keys.channel), call.info}};
}

// An exclusive hold lives in the lock hash whether a line's or not: the
// plain script releases both (and hands over to a line). Shared holds are
// the line's.
ScriptCall release_request(const std::string& prefix, detail::FenceScope fences, const ReleaseCall& call) {
  auto keys = detail::lock_keys(prefix, call.name, fences);
  std::string owner = wire_owner(call.owner, call.grant);
  std::string tomb = keys.lock + ":t:" + owner;
  if (call.mode == detail::LockMode::shared) {
    return {&line_release_script(),
            {std::move(keys.lock), std::move(tomb), std::move(keys.line), std::move(keys.fence)},
            {std::move(owner), std::to_string(call.held), std::move(keys.channel), call.all ? "1" : "0",
             std::to_string(call.tombstone.count())}};
  }
  return {&release_script(),
          {std::move(keys.lock), std::move(tomb), std::move(keys.line), std::move(keys.fence)},
          {std::move(owner), std::to_string(call.held), std::move(keys.channel), call.all ? "1" : "0",
           std::to_string(call.round), std::to_string(call.tombstone.count())}};
}

ScriptCall abandon_request(const std::string& prefix, detail::FenceScope fences, const detail::AbandonCall& call) {
  auto keys = detail::lock_keys(prefix, call.name, fences);
  std::string owner = wire_owner(call.owner, call.grant);
  std::string tomb = keys.lock + ":t:" + owner;
  return {
      &line_abandon_script(),
      {std::move(keys.lock), std::move(tomb), std::move(keys.line), std::move(keys.fence)},
      {std::move(owner), std::to_string(call.held), std::move(keys.channel), std::to_string(call.tombstone.count())}};
}

std::string permits_text(long long p) { return p == 0 ? std::string("no limit (a read lock)") : std::to_string(p); }

Result<AcquireOutcome> parse_acquire(const Reply& r, const AcquireCall& call) {
  long long code = 0, a = 0, b = 0;
  if (!int_at(r, 0, code) || !int_at(r, 1, a) || !int_at(r, 2, b)) return unexpected_reply("the acquire script", r);
  AcquireOutcome out;
  switch (code) {
    case 5:  // the line's wording (core/lock_line.cpp)
      return Status(Errc::invalid_argument, "permits disagree: the lock is used with " + permits_text(a) +
                                                " and this call asked for " + permits_text(call.permits));
    case 6:
      return Status(Errc::precondition_failed,
                    std::string("this owner holds the lock ") +
                        (a == 0 ? "shared and asked for it exclusively" : "exclusively and asked for it shared") +
                        ": a change of mode would wait for itself (release first)");
    case 1:
      out.kind = AcquireOutcome::Kind::granted;
      out.fence = static_cast<std::uint64_t>(a);
      out.depth = static_cast<unsigned>(b);
      break;
    case 0:  // b: the holder's PTTL (-1: no expiry, -2: gone meanwhile)
      out.kind = AcquireOutcome::Kind::busy;
      out.hint = a >= 0    ? detail::WaitHint::expiry(milliseconds(a))
                 : a == -1 ? detail::WaitHint::event()
                           : detail::WaitHint::retry(milliseconds(0));
      break;
    case 2:
      out.kind = AcquireOutcome::Kind::lost;
      break;
    default:
      out.kind = AcquireOutcome::Kind::mismatch;
      out.depth = static_cast<unsigned>(a);
  }
  return out;
}

Result<ReleaseOutcome> parse_release(const Reply& r) {
  long long code = 0, depth = 0;
  if (!int_at(r, 0, code) || !int_at(r, 1, depth)) return unexpected_reply("the release script", r);
  ReleaseOutcome out;
  out.depth = static_cast<unsigned>(depth);
  switch (code) {
    case 0:
    case 1:
      out.kind = ReleaseOutcome::Kind::released;
      break;
    case -1:
      out.kind = ReleaseOutcome::Kind::not_held;
      break;
    case -2:
      out.kind = ReleaseOutcome::Kind::not_owner;
      break;
    default:
      out.kind = ReleaseOutcome::Kind::mismatch;
  }
  return out;
}

// EVALSHA's command text (EVAL's with the body instead of the hash).
std::string eval_payload(std::string_view verb, std::string_view body_or_sha, const std::vector<std::string>& keys,
                         const std::vector<std::string>& args) {
  std::vector<std::string_view> argv;
  argv.reserve(3 + keys.size() + args.size());
  std::string numkeys = std::to_string(keys.size());
  argv.push_back(verb);
  argv.push_back(body_or_sha);
  argv.push_back(numkeys);
  for (const auto& k : keys) argv.push_back(k);
  for (const auto& a : args) argv.push_back(a);
  std::string payload;
  append_command(payload, argv);
  return payload;
}

// The EVAL request of an EVALSHA one: the same numkeys, keys and arguments
// (its tail, after the hash) behind EVAL and the script's body.
std::string as_eval(const std::string& evalsha, const Script& script) {
  // "*N\r\n$7\r\nEVALSHA\r\n$40\r\n<hash>\r\n<tail>"
  const std::size_t count_end = evalsha.find("\r\n") + 2;
  const std::size_t hash_at = evalsha.find(script.sha1, count_end);
  std::string out = evalsha.substr(0, count_end);
  for (std::string_view bulk : {std::string_view("EVAL"), script.body}) {
    out += '$';
    out += std::to_string(bulk.size());
    out += "\r\n";
    out += bulk;
    out += "\r\n";
  }
  out.append(evalsha, hash_at + script.sha1.size() + 2, std::string::npos);
  return out;
}

// A blocking call whose request is written and whose answer is unread
// (RedisBackend::send_now): it holds the pooled connection meanwhile.
struct SentEval {
  ScriptCall sc;
  bool waited = false;   // a WAIT follows the script in the same write
  std::string pool_key;  // the pool it goes back to
  std::unique_ptr<SyncConnection> conn;
  std::uint64_t before = 0;  // the connection's requests_sent() before the send
};

class RedisBackend final : public RedlockMaster {
 public:
  RedisBackend(boost::asio::io_context& io, std::unique_ptr<Route> route, ConnectionConfig config, std::string prefix,
               ReplicaWait wait)
      : io_(io),
        route_(std::move(route)),
        config_(std::move(config)),
        prefix_(std::move(prefix)),
        wait_(wait),
        fences_(route_->moves() ? detail::FenceScope::name : detail::FenceScope::prefix),
        resubscribe_timer_(io) {
    // TLS on the fast path: one context for its connections, made as the
    // I/O thread's are. Without it (a file that cannot be loaded) the I/O
    // path reports why at connect.
    if (config_.endpoint.tls)
      if (auto ctx = make_client_tls_context(config_.endpoint); ctx.ok()) tls_ctx_ = std::move(ctx.value());
  }

  ~RedisBackend() override { close(); }

  void start(std::function<void(Status)> done) override {
    route_->on_link([this](bool up) {
      if (events_.link) events_.link(up);
    });
    route_->start([this, done = std::move(done)](Status s) mutable {
      const std::string& mode = config_.endpoint.pubsub;
      if (!s.ok() || !route_->cluster() || mode == "classic") return done(s);
      probe_sharded(mode == "sharded", std::move(done));
    });
  }

  // Whether the cluster knows sharded pub/sub (Redis 7): COMMAND INFO
  // names SSUBSCRIBE there, an older server answers nil. Every client of a
  // cluster decides alike, so releases publish where waiters subscribe. A
  // user without the right to ask is taken to be on a current server.
  void probe_sharded(bool required, std::function<void(Status)> done) {
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

  void close() override {
    closed_ = true;
    resubscribe_timer_.cancel();
    route_->close();
    for (auto& [node, sub] : subs_) sub->close();
    for (auto& r : retired_) r->close();
    fail_ready(Status(Errc::cancelled, "client closed"));
    watches_.clear();
  }

  detail::Capabilities capabilities() const override {
    detail::Capabilities caps;
    caps.lines = true;
    return caps;
  }
  void set_events(detail::BackendEvents events) override { events_ = std::move(events); }

  void acquire(const AcquireCall& call, std::function<void(Result<AcquireOutcome>)> done) override {
    ScriptCall sc = acquire_request(prefix_, fences_, call, call.queued);
    if (wait_.replicas > 0) {
      return eval_script(*sc.script, sc.keys, sc.args, true,
                         [this, call, done = std::move(done)](Result<Reply> r, Status replicated) mutable {
                           if (!r.ok()) return done(r.status());
                           auto out = parse_acquire(*r, call);
                           if (out.ok() && out->kind == AcquireOutcome::Kind::granted && !replicated.ok())
                             return undo_unreplicated(call, replicated, std::move(done));
                           done(std::move(out));
                         });
    }
    eval(*sc.script, sc.keys, sc.args, [call, done = std::move(done)](Result<Reply> r) {
      if (!r.ok()) return done(r.status());
      done(parse_acquire(*r, call));
    });
  }

  void release(const ReleaseCall& call, std::function<void(Result<ReleaseOutcome>)> done) override {
    ScriptCall sc = release_request(prefix_, fences_, call);
    eval(*sc.script, sc.keys, sc.args, [done = std::move(done)](Result<Reply> r) {
      if (!r.ok()) return done(r.status());
      done(parse_release(*r));
    });
  }

  void abandon(const detail::AbandonCall& call, std::function<void(Status)> done) override {
    if (call.line || call.mode == detail::LockMode::shared) {
      // Always: a place in the line, or a hand-over it never heard of.
      ScriptCall sc = abandon_request(prefix_, fences_, call);
      return eval(*sc.script, sc.keys, sc.args, [done = std::move(done)](Result<Reply> r) { done(r.status()); });
    }
    auto undo = detail::undo_of(call);
    if (!undo) return boost::asio::post(io_, [done = std::move(done)] { done({}); });
    release(*undo, [done = std::move(done)](Result<ReleaseOutcome> r) { done(r.status()); });
  }

  // The blocking fast path, over TCP or TLS. In a cluster or behind
  // Sentinel it goes to the node the route names now; a redirect hands the
  // call to the I/O thread's path, which follows it (nothing ran). In WAIT
  // mode the WAIT goes in the same write as the script, as on the I/O
  // path, and a grant the replicas did not acknowledge is undone here.
  std::optional<Result<AcquireOutcome>> acquire_now(const AcquireCall& call) override {
    if (!sync_ok()) return std::nullopt;
    // A try leaves no place in the line behind it.
    ScriptCall sc = acquire_request(prefix_, fences_, call, call.queued && call.keep_place);
    if (wait_.replicas == 0) {
      auto r = eval_now(sc, call.deadline);
      if (!r) return std::nullopt;
      if (!r->ok()) return Result<AcquireOutcome>(r->status());
      return parse_acquire(**r, call);
    }
    // A try waits for the WAIT too (its budget is the command timeout's).
    auto by = call.deadline;
    if (!call.keep_place) by = std::max(by, std::chrono::steady_clock::now() + config_.command_timeout + wait_.timeout);
    Status replicated;
    auto r = eval_now(sc, by, &replicated);
    if (!r) return std::nullopt;
    if (!r->ok()) return Result<AcquireOutcome>(r->status());
    auto out = parse_acquire(**r, call);
    if (!out.ok() || out->kind != AcquireOutcome::Kind::granted || replicated.ok()) return out;
    auto undone = release_now(undo_of_grant(call));
    if (!undone) return Result<AcquireOutcome>(unreplicated(replicated, Status(Errc::unavailable, "redirected")));
    return Result<AcquireOutcome>(unreplicated(replicated, *undone));
  }
  std::optional<Result<ReleaseOutcome>> release_now(const ReleaseCall& call) override {
    if (!sync_ok()) return std::nullopt;
    auto r = eval_now(release_request(prefix_, fences_, call));
    if (!r) return std::nullopt;
    if (!r->ok()) return Result<ReleaseOutcome>(r->status());
    return parse_release(**r);
  }

  // Redlock's halves (RedlockMaster): one server, so never redirected.
  struct PendingEval final : Pending {
    std::unique_ptr<SentEval> eval;
    AcquireCall call;  // acquires: what the answer is parsed against
    int fd() const override { return eval->conn ? eval->conn->fd() : -1; }
  };
  Sent pending(std::optional<Result<std::unique_ptr<SentEval>>> sent, AcquireCall call = {}) {
    if (!sent) return std::nullopt;
    if (!sent->ok()) return Result<std::unique_ptr<Pending>>(sent->status());
    auto p = std::make_unique<PendingEval>();
    p->eval = std::move(sent->value());
    p->call = std::move(call);
    return Result<std::unique_ptr<Pending>>(std::unique_ptr<Pending>(std::move(p)));
  }
  Sent send_acquire_now(const AcquireCall& call, std::chrono::steady_clock::time_point by, bool pooled_only) override {
    if (!sync_ok()) return std::nullopt;
    return pending(send_now(acquire_request(prefix_, fences_, call, call.queued && call.keep_place), by, pooled_only),
                   call);
  }
  Sent send_release_now(const ReleaseCall& call, std::chrono::steady_clock::time_point by, bool pooled_only) override {
    if (!sync_ok()) return std::nullopt;
    return pending(send_now(release_request(prefix_, fences_, call), by, pooled_only));
  }
  Result<AcquireOutcome> acquire_answer(Pending& sent, std::chrono::steady_clock::time_point by,
                                        bool readable) override {
    auto& p = static_cast<PendingEval&>(sent);
    auto r = receive_now(*p.eval, by, readable);
    if (!r) return Status(Errc::unavailable, "redirected");  // one server does not redirect
    if (!r->ok()) return r->status();
    return parse_acquire(**r, p.call);
  }
  Result<ReleaseOutcome> release_answer(Pending& sent, std::chrono::steady_clock::time_point by,
                                        bool readable) override {
    auto r = receive_now(*static_cast<PendingEval&>(sent).eval, by, readable);
    if (!r) return Status(Errc::unavailable, "redirected");
    if (!r->ok()) return r->status();
    return parse_release(**r);
  }

  // One script call per slot (a script's keys must share one); the calls
  // to one master go out in one write, so a tick costs one round trip per
  // master. A master that fails leaves its calls unconfirmed (retried next
  // tick); only when all fail is the batch a failure.
  void renew(const std::vector<RenewCall>& calls,
             std::function<void(Result<std::vector<RenewOutcome>>)> done) override {
    if (calls.empty()) return boost::asio::post(io_, [done = std::move(done)] { done(std::vector<RenewOutcome>{}); });
    std::map<int, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < calls.size(); ++i)
      groups[route_->cluster() ? key_slot(detail::lock_keys(prefix_, calls[i].name).lock) : -1].push_back(i);
    auto batch = std::make_shared<RenewBatch>();
    batch->out.assign(calls.size(), RenewOutcome::unconfirmed);
    batch->groups_left = groups.size();
    batch->done = std::move(done);
    for (auto& [slot, indexes] : groups) renew_group(calls, std::move(indexes), batch);
  }

  // SCAN in pages of 1000 keys, on every master in turn; a key that moves
  // during the scan (expiry, a slot migration) may be reported twice or
  // missed (SCAN's guarantee covers keys that stay).
  void names(const std::string& prefix, std::function<void(Result<std::vector<std::string>>)> done) override {
    auto scan = std::make_shared<Scan>();
    scan->pattern = detail::lock_key_pattern(prefix_, prefix);
    scan->masters = route_->masters();
    scan->done = std::move(done);
    scan_page(scan, "0");
  }

  struct Scan {
    std::string pattern;
    std::vector<std::string> masters;  // left to scan; the current one first
    std::vector<std::string> found;
    std::function<void(Result<std::vector<std::string>>)> done;
  };

  void scan_page(std::shared_ptr<Scan> scan, const std::string& cursor) {
    std::string payload;
    append_command(payload, {"SCAN", cursor, "MATCH", scan->pattern, "COUNT", "1000"});
    std::vector<std::string> commands;
    commands.push_back(std::move(payload));
    route_->exec_at(scan->masters.front(), std::move(commands), [this, scan](Status s, std::vector<Reply>&& replies) {
      if (!s.ok()) return scan->done(s);
      const Reply& r = replies[0];
      if (r.is_error()) return scan->done(translate_error(r.str));
      if (r.type != Reply::Type::array || r.elements.size() != 2 || r.elements[1].type != Reply::Type::array)
        return scan->done(unexpected_reply("SCAN", r));
      for (const Reply& key : r.elements[1].elements)
        if (std::string name = detail::name_of_key(prefix_, key.str); !name.empty())
          scan->found.push_back(std::move(name));
      if (r.elements[0].str != "0") return scan_page(scan, r.elements[0].str);
      scan->masters.erase(scan->masters.begin());
      if (!scan->masters.empty()) return scan_page(scan, "0");
      // A name has several keys (lock, line, tombstones): once each.
      std::sort(scan->found.begin(), scan->found.end());
      scan->found.erase(std::unique(scan->found.begin(), scan->found.end()), scan->found.end());
      scan->done(std::move(scan->found));
    });
  }

  // The line's inspect script settles the name first (core/lock_line.cpp's
  // line_settle) and reports the oldest grant; a plain lock's waiters are
  // the subscribers of its channel, a line's are its line.
  void inspect(const std::string& name, std::function<void(Result<LockInfo>)> done) override {
    auto keys = detail::lock_keys(prefix_, name, fences_);
    const Script& script = published(line_inspect_script());
    std::vector<std::string> commands(3);
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

  // The inspect script's, the fence counter's and PUBSUB NUMSUB's replies.
  static ReplyHandler inspected(std::function<void(Result<LockInfo>)> done) {
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
      if (is_line != 0)
        info.waiters = static_cast<unsigned>(line);
      else if (numsub.type == Reply::Type::array && numsub.elements.size() == 2)
        info.waiters = static_cast<unsigned>(numsub.elements[1].integer);
      done(info);
    };
  }

  // One subscription per name, whatever the attempt: a release wakes the
  // name's waiters (ClientCore hands it to one).
  void watch(const detail::WatchKey& key, std::function<void(Status)> ready) override {
    const std::string& name = key.name;
    std::string channel = detail::lock_keys(prefix_, name).channel;
    Watch& w = watches_[channel];
    w.name = name;
    ++w.refs;
    if (w.confirmed) {
      post_all({std::move(ready)}, {});
      return;
    }
    const ConnectionConfig c = node_for(channel);
    if (w.node.empty()) w.node = node_key(c);
    Subscriber& sub = subscriber(w.node, c);
    // Without a subscription connection (refused, maxclients, down) the
    // waiter is told at once and waits on the holder's lease instead.
    if (!sub.ready() && sub.down()) {
      post_all({std::move(ready)}, *sub.down());
      return;
    }
    w.ready.push_back(std::move(ready));
    if (sub.ready() && !sub.subscribing(channel)) sub.subscribe(channel);
  }

  void unwatch(const detail::WatchKey& key) override {
    std::string channel = detail::lock_keys(prefix_, key.name).channel;
    auto it = watches_.find(channel);
    if (it == watches_.end() || --it->second.refs > 0) return;
    post_all(std::exchange(it->second.ready, {}), Status(Errc::cancelled, "unwatched"));
    const std::string node = std::move(it->second.node);
    watches_.erase(it);
    if (auto s = subs_.find(node); s != subs_.end() && s->second->ready()) s->second->unsubscribe(channel);
  }

  std::uint64_t commands_sent() const override {
    std::uint64_t n = route_->requests_sent() + sync_sent_.load();
    for (const auto& [node, sub] : subs_) n += sub->requests_sent();
    return n;
  }
  std::uint64_t reconnects() const override {
    std::uint64_t n = route_->reconnects();
    for (const auto& [node, sub] : subs_) n += sub->reconnects();
    return n;
  }

 private:
  struct RenewBatch {
    std::vector<RenewOutcome> out;  // unconfirmed until a group answers
    std::size_t groups_left = 0;
    std::size_t groups_answered = 0;
    Status failure;
    std::function<void(Result<std::vector<RenewOutcome>>)> done;

    void group_done(Status s) {
      if (s.ok())
        ++groups_answered;
      else if (failure.ok())
        failure = std::move(s);
      if (--groups_left > 0) return;
      if (groups_answered == 0) return done(failure);
      done(std::move(out));
    }
  };

  void renew_group(const std::vector<RenewCall>& calls, std::vector<std::size_t> indexes,
                   std::shared_ptr<RenewBatch> batch) {
    std::vector<std::string> keys, args;
    keys.reserve(indexes.size());
    args.reserve(indexes.size() * 3);
    for (std::size_t i : indexes) {
      const RenewCall& c = calls[i];
      auto k = detail::lock_keys(prefix_, c.name, fences_);
      keys.push_back(std::move(k.lock));
      if (c.line) keys.push_back(std::move(k.line));
      args.push_back(wire_owner(c.owner, c.grant));
      args.push_back(std::to_string(c.lease.count()));
      args.push_back(c.line ? "l" : "p");
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

  struct Watch {
    std::string name;
    unsigned refs = 0;
    bool confirmed = false;
    bool resync = false;  // subscribed again after a gap: waiters retry once
    std::string node;     // the subscriber it is (to be) subscribed on
    std::vector<std::function<void(Status)>> ready;
  };

  // EVALSHA, falling back to EVAL when the server has not seen the script
  // (first use, restart, SCRIPT FLUSH). NOSCRIPT means nothing ran, so the
  // fallback cannot apply anything twice.
  // The script as this backend sends it: sharded, every PUBLISH a SPUBLISH.
  const Script& published(const Script& s) const { return sharded_ ? with_sharded_publish(s) : s; }

  void eval(const Script& original, const std::vector<std::string>& keys, const std::vector<std::string>& args,
            std::function<void(Result<Reply>)> done) {
    eval_script(original, keys, args, false,
                [done = std::move(done)](Result<Reply> r, const Status&) { done(std::move(r)); });
  }

  // The slot of a lock's keys (they share its tag); one server: -1.
  int slot_of(const std::string& key) const { return route_->cluster() ? key_slot(key) : -1; }

  bool sync_ok() const { return !config_.endpoint.tls || tls_ctx_ != nullptr; }

  // The fast path's endpoint for a node: the backend's credentials and
  // settings, at the node's address (db 0 in a cluster, which has no other).
  detail::RedisEndpoint endpoint_of(const ClusterNode& node) const {
    detail::RedisEndpoint ep = config_.endpoint;
    ep.host = node.host;
    ep.port = node.port;
    if (route_->cluster()) ep.db = 0;
    return ep;
  }

  void open_blocking() override { open_blocking_within(config_.connect_timeout); }
  void open_blocking_within(milliseconds patience) override {
    if (!sync_ok() || route_->moves()) return;  // a moving topology's pools fill on first use
    auto c = SyncConnection::open(config_.endpoint, std::min(config_.connect_timeout, patience),
                                  std::min(config_.command_timeout, patience), tls_ctx_.get());
    if (!c.ok()) return;
    c.value()->set_command_timeout(config_.command_timeout);
    std::lock_guard lk(pool_mu_);
    pools_[""].push_back(std::move(c.value()));
  }

  // EVALSHA (EVAL on NOSCRIPT) on a pooled blocking connection to the node
  // serving the keys, on the calling thread. A broken connection is
  // dropped; the next call opens one. nullopt: no node is known, or the
  // node redirected the call (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: nothing
  // ran), so the I/O path takes it.
  // `replicated` (WAIT mode): a WAIT follows the script, and its verdict
  // is set there.
  std::optional<Result<Reply>> eval_now(
      const ScriptCall& sc, std::chrono::steady_clock::time_point by = std::chrono::steady_clock::time_point::max(),
      Status* replicated = nullptr) {
    auto sent = send_now(sc, by, false, replicated != nullptr);
    if (!sent) return std::nullopt;
    if (!sent->ok()) return Result<Reply>(sent->status());
    return receive_now(*sent->value(), by, false, replicated);
  }

  // The two halves of eval_now: the request written (its connection held
  // by the SentEval), then its answer read and the connection pooled again.
  // pooled_only: nullopt rather than a connection opened now.
  std::optional<Result<std::unique_ptr<SentEval>>> send_now(const ScriptCall& sc,
                                                            std::chrono::steady_clock::time_point by,
                                                            bool pooled_only = false, bool waited = false) {
    using Out = Result<std::unique_ptr<SentEval>>;
    const bool moves = route_->moves();
    std::optional<ClusterNode> node;
    if (moves) {
      node = route_->blocking_target(slot_of(sc.keys.front()));
      if (!node) return std::nullopt;
    }
    auto sent = std::make_unique<SentEval>();
    sent->sc = sc;
    sent->waited = waited;
    sent->sc.script = &published(*sc.script);
    // One server: one pool (""); else one per node address.
    if (moves) sent->pool_key = node->address();
    {
      std::lock_guard lk(pool_mu_);
      auto& pool = pools_[sent->pool_key];
      if (!pool.empty()) {
        sent->conn = std::move(pool.back());
        pool.pop_back();
      }
    }
    // A connection idle for a while may have been closed by its server
    // (restarted, killed, failed over): a fresh one, rather than a command
    // whose outcome would be in doubt.
    if (sent->conn && sent->conn->closed_while_idle(kIdleCheck)) sent->conn.reset();
    if (!sent->conn && pooled_only) return std::nullopt;
    if (!sent->conn) {
      const detail::RedisEndpoint ep = moves ? endpoint_of(*node) : config_.endpoint;
      // A silent server accepts connections (the kernel does) but never
      // answers the handshake: the call's deadline bounds it too.
      using std::chrono::steady_clock;
      auto patience = config_.command_timeout;
      if (by != steady_clock::time_point::max())
        patience =
            std::clamp(std::chrono::duration_cast<milliseconds>(by - steady_clock::now()), milliseconds(1), patience);
      auto opened = SyncConnection::open(ep, config_.connect_timeout, patience, tls_ctx_.get());
      if (!opened.ok()) {
        if (steady_clock::now() + milliseconds(5) >= by)  // cut short by the deadline, not refused
          return Out(Status(Errc::timeout, "no answer from " + ep.describe() + " within the call's deadline"));
        // A node of a moving topology may be gone: the I/O path finds its successor.
        if (moves && opened.status().code() == Errc::unavailable) return std::nullopt;
        return Out(opened.status());
      }
      sent->conn = std::move(opened.value());
      sent->conn->set_command_timeout(config_.command_timeout);
    }
    sent->before = sent->conn->requests_sent();
    // A script's first use on a connection sends it whole, which loads it:
    // a server that never ran it (just started, restarted) costs no NOSCRIPT
    // round trip, and a request whose answer is read late (Redlock's
    // slowest masters) runs at once.
    const Script& script = *sent->sc.script;
    const bool whole = !sent->conn->sent_script(script.sha1);
    if (whole) sent->conn->note_script(script.sha1);
    if (Status s = send_script(*sent, whole ? eval_payload("EVAL", script.body, sc.keys, sc.args)
                                            : eval_payload("EVALSHA", script.sha1, sc.keys, sc.args));
        !s.ok()) {
      sync_sent_.fetch_add(sent->conn->requests_sent() - sent->before, std::memory_order_relaxed);
      return Out(s);
    }
    return Out(std::move(sent));
  }
  std::optional<Result<Reply>> receive_now(SentEval& sent, std::chrono::steady_clock::time_point by,
                                           bool readable = false, Status* replicated = nullptr) {
    std::vector<Reply> replies;
    SyncConnection& conn = *sent.conn;
    const std::size_t n = sent.waited ? 2 : 1;
    Status s = conn.receive(n, replies, by, readable);
    if (s.ok() && replies.front().is_error() && replies.front().str.starts_with("NOSCRIPT")) {
      // Nothing ran (a WAIT after it acknowledged nothing of ours).
      s = send_script(sent, eval_payload("EVAL", sent.sc.script->body, sent.sc.keys, sent.sc.args));
      if (s.ok()) s = conn.receive(n, replies, by);
    }
    if (s.ok() && sent.waited && replicated != nullptr) *replicated = replication_of(replies[1]);
    sync_sent_.fetch_add(conn.requests_sent() - sent.before, std::memory_order_relaxed);
    if (!conn.broken()) {
      std::lock_guard lk(pool_mu_);
      auto& pool = pools_[sent.pool_key];
      if (pool.size() < kPoolIdle) pool.push_back(std::move(sent.conn));
    }
    sent.conn.reset();
    if (!s.ok()) return Result<Reply>(s);
    if (replies.front().is_error()) {
      if (const auto redirect = route_->moves() ? parse_redirect(replies.front().str).kind : Redirect::Kind::none;
          redirect != Redirect::Kind::none) {
        if (redirect == Redirect::Kind::moved)
          boost::asio::post(io_, [this] { route_->refresh(); });  // the map is behind: learn it soon
        return std::nullopt;
      }
      return Result<Reply>(translate_error(replies.front().str));
    }
    return Result<Reply>(std::move(replies.front()));
  }

  // EVALSHA, falling back to EVAL when the server has not seen the script
  // (first use, restart, SCRIPT FLUSH): NOSCRIPT means nothing ran, so the
  // fallback cannot apply anything twice. `waited` (WAIT mode): a WAIT in the
  // same pipeline, so it runs on the node that ran the script (after an ASK
  // too) and covers its writes, at no extra round trip; `done` gets the
  // script's reply and whether wait_.replicas replicas acknowledged within
  // wait_.timeout (unwaited: ok).
  void eval_script(const Script& original, const std::vector<std::string>& keys, const std::vector<std::string>& args,
                   bool waited, std::function<void(Result<Reply>, Status)> done) {
    const Script& script = published(original);
    std::vector<std::string> commands(waited ? 2 : 1);
    commands[0] = eval_payload("EVALSHA", script.sha1, keys, args);
    if (waited) append_wait(commands[1]);
    run_eval(slot_of(keys.front()), script, std::move(commands), std::move(done), false);
  }
  void run_eval(int slot, const Script& script, std::vector<std::string> commands,
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

  // A grant the replicas did not acknowledge is undone (idempotently: only
  // the level it added) and reported as unavailable. If the undo's outcome
  // is not known, neither is the grant's: outcome_unknown, so the caller
  // cleans up after it (an unavailable attempt needs no cleanup).
  void undo_unreplicated(const AcquireCall& call, const Status& why, std::function<void(Result<AcquireOutcome>)> done) {
    release(undo_of_grant(call),
            [why, done = std::move(done)](Result<ReleaseOutcome> r) mutable { done(unreplicated(why, r)); });
  }
  static ReleaseCall undo_of_grant(const AcquireCall& call) {
    ReleaseCall undo{call.name, call.owner, call.held + 1, false};
    undo.grant = call.grant;
    undo.mode = call.mode;
    return undo;
  }
  static Status unreplicated(const Status& why, const Result<ReleaseOutcome>& undone) {
    if (undone.ok() &&
        (undone->kind == ReleaseOutcome::Kind::released || undone->kind == ReleaseOutcome::Kind::not_held))
      return Status(why.code(), "grant " + why.message() + "; it was released");
    return Status(Errc::outcome_unknown,
                  "grant " + why.message() + "; releasing it failed too (" +
                      (undone.ok() ? std::string("not the owner's any more") : undone.status().to_string()) + ")");
  }

  // WAIT's verdict: enough replicas acknowledged within the timeout?
  Status replication_of(const Reply& w) const {
    if (w.is_error()) return translate_error(w.str);
    if (w.type != Reply::Type::integer) return unexpected_reply("WAIT", w);
    if (w.integer >= wait_.replicas) return {};
    return Status(Errc::unavailable, "not replicated to " + std::to_string(wait_.replicas) +
                                         " replica(s): " + std::to_string(w.integer) + " acknowledged within " +
                                         std::to_string(wait_.timeout.count()) + " ms");
  }
  // A blocking request on its connection, with its WAIT behind it (and the
  // WAIT's time allowed for the answer) when it is a waited one.
  Status send_script(SentEval& sent, std::string payload) const {
    if (!sent.waited) return sent.conn->send(payload);
    append_wait(payload);
    return sent.conn->send(payload, wait_.timeout);
  }
  void append_wait(std::string& out) const {
    append_command(out, {"WAIT", std::to_string(wait_.replicas), std::to_string(wait_.timeout.count())});
  }

  // Watch callbacks never run inline (the caller may be iterating its own
  // waiters, or this very map): they are posted.
  void post_all(std::vector<std::function<void(Status)>> fs, const Status& s) {
    for (auto& f : fs) boost::asio::post(io_, [f = std::move(f), s] { f(s); });
  }
  void fail_ready(const Status& s) {
    for (auto& [channel, w] : watches_) post_all(std::exchange(w.ready, {}), s);
  }

  // Where `channel` is subscribed: the master of its slot (sharded), or
  // the one node every client of the set-up subscribes at (classic).
  ConnectionConfig node_for(const std::string& channel) const {
    return route_->subscriber_config(sharded_ ? key_slot(channel) : Route::kSubscriberSlot);
  }
  static std::string node_key(const ConnectionConfig& c) {
    return c.endpoint.host + ":" + std::to_string(c.endpoint.port);
  }

  // The subscriber at node `key` (made at `c` the first time). A watch's
  // node always has one.
  Subscriber& subscriber(const std::string& key, const ConnectionConfig& c) {
    auto& slot = subs_[key];
    if (!slot) {
      Subscriber::Handlers h;
      h.message = [this](const std::string& channel, const std::string& payload) { on_message(channel, payload); };
      h.subscribed = [this, key](const std::string& channel, const Reply* error) {
        on_subscribed(key, channel, error);
      };
      h.dropped = [this, key](const std::string& channel) { on_dropped(key, channel); };
      h.state = [this, key](bool up) { on_subscriber_state(key, up); };
      slot = std::make_unique<Subscriber>(io_, c, sharded_, std::move(h));
    }
    return *slot;
  }

  void on_subscriber_state(const std::string& key, bool up) {
    auto it = subs_.find(key);
    if (closed_ || it == subs_.end() || !it->second) return;
    Subscriber& sub = *it->second;
    if (up) {
      // Resubscribe everything; releases published while we were away are
      // lost, so every waiter retries once.
      for (auto& [channel, w] : watches_)
        if (w.node == key && !sub.subscribing(channel)) sub.subscribe(channel);
      if (events_.resync) events_.resync();
      return;
    }
    // The first attempt failed or the link dropped: waiters fall back to
    // waiting on the holder's lease and retrying; reconnects continue in the
    // background, and a node that stays down is replaced (rehome).
    const Status why = sub.down() ? *sub.down() : Status(Errc::unavailable, "the subscription connection is down");
    for (auto& [channel, w] : watches_) {
      if (w.node != key) continue;
      w.confirmed = false;
      post_all(std::exchange(w.ready, {}), why);
    }
    if (route_->moves()) rehome_later();
  }

  void on_subscribed(const std::string& key, const std::string& channel, const Reply* error) {
    auto it = watches_.find(channel);
    if (it == watches_.end() || it->second.node != key) return;  // unwatched, or moved meanwhile
    Watch& w = it->second;
    if (!error) {
      w.confirmed = true;
      post_all(std::exchange(w.ready, {}), {});
      // Subscribed again after a gap (its slot moved): a release published
      // in between was missed, so the waiters retry once.
      if (std::exchange(w.resync, false) && events_.resync) events_.resync();
      return;
    }
    // Sharded: a node that no longer serves the slot (a migration, or a map
    // not yet learnt) redirects; the waiters keep waiting for the node that does.
    if (route_->moves() && parse_redirect(error->str).kind != Redirect::Kind::none) return rehome_later();
    post_all(std::exchange(w.ready, {}), translate_error(error->str));
  }

  // Sharded: the node unsubscribed the channel itself, its slot has moved.
  void on_dropped(const std::string& key, const std::string& channel) {
    auto it = watches_.find(channel);
    if (it == watches_.end() || it->second.node != key) return;
    it->second.confirmed = false;
    it->second.resync = true;
    rehome_later();
  }

  // Cluster or Sentinel: watches not subscribed (their node down, their
  // slot moved) go to the node the route names now, once it has learnt the
  // change; until then this runs again. A subscriber no watch needs any
  // more and that is down is closed.
  void rehome_later() {
    if (closed_ || rehome_armed_) return;
    route_->refresh();
    rehome_armed_ = true;
    resubscribe_timer_.expires_after(kRehomeGap);
    resubscribe_timer_.async_wait([this](const boost::system::error_code& ec) {
      rehome_armed_ = false;
      if (!ec && !closed_) rehome();
    });
  }

  void rehome() {
    bool again = false;
    for (auto& [channel, w] : watches_) {
      if (w.confirmed) continue;
      const ConnectionConfig c = node_for(channel);
      if (std::string key = node_key(c); key != w.node) {
        w.node = std::move(key);
        w.resync = true;
      }
      Subscriber& sub = subscriber(w.node, c);
      if (!sub.ready()) {
        again = true;  // subscribes once up, unless it is replaced first
        continue;
      }
      if (!sub.subscribing(channel)) sub.subscribe(channel);
    }
    for (auto it = subs_.begin(); it != subs_.end();) {
      const bool needed =
          std::any_of(watches_.begin(), watches_.end(), [&](const auto& w) { return w.second.node == it->first; });
      if (needed || it->second->ready()) {
        ++it;
        continue;
      }
      // Closed, not destroyed: its handlers may still be queued.
      it->second->close();
      retired_.push_back(std::move(it->second));
      it = subs_.erase(it);
    }
    if (again) rehome_later();
  }

  void on_message(const std::string& channel, const std::string& payload) {
    auto it = watches_.find(channel);
    if (it == watches_.end()) return;
    // A copy of the name: the handlers may unwatch.
    std::string name = it->second.name;
    // A hand-over, "h:<fence>:<lease ms>:<owner>/<grant>": its recipient
    // holds the lock now (the other waiters sleep on: it is held again,
    // for up to that lease unless renewed).
    if (payload.starts_with("h:") && events_.handed) {
      const auto colon = payload.find(':', 2);
      const auto colon2 = colon == std::string::npos ? colon : payload.find(':', colon + 1);
      detail::HandOver to;
      to.name = name;
      if (colon2 != std::string::npos &&
          split_wire_owner(std::string_view(payload).substr(colon2 + 1), to.owner, to.grant)) {
        to.fence = std::strtoull(payload.c_str() + 2, nullptr, 10);
        to.lease = milliseconds(std::strtoll(payload.c_str() + colon + 1, nullptr, 10));
        events_.handed(to);
      }
      return;  // held again: nobody else could take it
    }
    if (payload == "c") {  // a free lock granted: only observers care
      if (events_.changed) events_.changed(name);
      return;
    }
    if (events_.released) events_.released({std::move(name), 0});
  }

  boost::asio::io_context& io_;
  std::unique_ptr<Route> route_;
  ConnectionConfig config_;  // one server: its endpoint (the fast path's)
  std::string prefix_;
  ReplicaWait wait_;
  std::shared_ptr<ssl_ctx_st> tls_ctx_;  // TLS: the fast path's connections
  detail::FenceScope fences_;
  // Subscribers by node ("host:port"): one in classic mode, one per master
  // a watched name lives on when sharded.
  std::map<std::string, std::unique_ptr<Subscriber>> subs_;
  std::vector<std::unique_ptr<Subscriber>> retired_;  // closed subscribers, kept until the backend goes
  boost::asio::steady_timer resubscribe_timer_;       // rehome_later
  static constexpr milliseconds kRehomeGap{250};
  bool rehome_armed_ = false;
  bool sharded_ = false;  // SSUBSCRIBE/SPUBLISH (a cluster that knows them); set in start()
  bool closed_ = false;
  std::map<std::string, Watch> watches_;  // by channel
  // Blocking connections of the fast path, per node address ("" for the
  // one server) (any thread; guarded by pool_mu_).
  static constexpr std::size_t kPoolIdle = 8;
  static constexpr milliseconds kIdleCheck{1000};  // pooled longer: checked before use
  std::mutex pool_mu_;
  std::map<std::string, std::vector<std::unique_ptr<SyncConnection>>> pools_;
  std::atomic<std::uint64_t> sync_sent_{0};
  detail::BackendEvents events_;
};

}  // namespace

std::unique_ptr<detail::Backend> make_redis_backend(boost::asio::io_context& io, ConnectionConfig config,
                                                    std::string key_prefix, ReplicaWait wait) {
  auto route = make_single_route(io, config);
  return std::make_unique<RedisBackend>(io, std::move(route), std::move(config), std::move(key_prefix), wait);
}

std::unique_ptr<RedlockMaster> make_redlock_master(boost::asio::io_context& io, ConnectionConfig config,
                                                   std::string key_prefix) {
  auto route = make_single_route(io, config);
  return std::make_unique<RedisBackend>(io, std::move(route), std::move(config), std::move(key_prefix), ReplicaWait{});
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

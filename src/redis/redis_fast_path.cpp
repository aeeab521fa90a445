// RedisBackend's blocking fast path (redis_backend_impl.hpp): a script call
// on a pooled blocking connection, on the calling thread, in one or two
// halves (Redlock writes to every master before it reads an answer).
#include <algorithm>
#include <boost/asio/post.hpp>

#include "redis/cluster_map.hpp"
#include "redis/errors.hpp"
#include "redis/redis_backend_impl.hpp"

namespace dlock::redis {

std::optional<Result<AcquireOutcome>> RedisBackend::acquire_now(const AcquireCall& call) {
  if (!sync_ok()) return std::nullopt;
  if (Status bad = check_layout(call); !bad.ok()) return Result<AcquireOutcome>(bad);
  // A try leaves no place in the line behind it.
  ScriptCall sc = acquire_request(keyspace_, call, call.queued && call.keep_place, 0, member_of(call, 0));
  if (wait_.replicas == 0) {
    auto r = eval_now(sc, call.deadline);
    if (!r) return std::nullopt;
    if (!r->ok()) return Result<AcquireOutcome>(keyed(r->status(), call.name));
    return parse_acquire(**r, call);
  }
  // A try waits for the WAIT too (its budget is the command timeout's).
  auto by = call.deadline;
  if (!call.keep_place) by = std::max(by, std::chrono::steady_clock::now() + config_.command_timeout + wait_.timeout);
  Status replicated;
  auto r = eval_now(sc, by, &replicated);
  if (!r) return std::nullopt;
  if (!r->ok()) return Result<AcquireOutcome>(keyed(r->status(), call.name));
  auto out = parse_acquire(**r, call);
  if (!out.ok() || out->kind != AcquireOutcome::Kind::granted || replicated.ok()) return out;
  auto undone = release_now(undo_of_grant(call));
  if (!undone) return Result<AcquireOutcome>(unreplicated(replicated, Status(Errc::unavailable, "redirected")));
  return Result<AcquireOutcome>(unreplicated(replicated, *undone));
}

std::optional<Result<ReleaseOutcome>> RedisBackend::release_now(const ReleaseCall& call) {
  if (!sync_ok()) return std::nullopt;
  auto r = eval_now(release_request(keyspace_, call));
  if (!r) return std::nullopt;
  if (!r->ok()) return Result<ReleaseOutcome>(r->status());
  return parse_release(**r);
}

RedisBackend::Sent RedisBackend::pending(std::optional<Result<std::unique_ptr<SentEval>>> sent, AcquireCall call) {
  if (!sent) return std::nullopt;
  if (!sent->ok()) return Result<std::unique_ptr<Pending>>(sent->status());
  auto p = std::make_unique<PendingEval>();
  p->eval = std::move(sent->value());
  p->call = std::move(call);
  return Result<std::unique_ptr<Pending>>(std::unique_ptr<Pending>(std::move(p)));
}

RedisBackend::Sent RedisBackend::send_acquire_now(const AcquireCall& call, std::uint64_t round,
                                                  std::chrono::steady_clock::time_point by, bool pooled_only) {
  if (!sync_ok()) return std::nullopt;
  return pending(
      send_now(acquire_request(keyspace_, call, call.queued && call.keep_place, round, member_of(call, round)), by,
               pooled_only),
      call);
}

RedisBackend::Sent RedisBackend::send_release_now(const ReleaseCall& call, std::uint64_t round,
                                                  std::chrono::steady_clock::time_point by, bool pooled_only) {
  if (!sync_ok()) return std::nullopt;
  return pending(send_now(release_request(keyspace_, call, round), by, pooled_only));
}

Result<AcquireOutcome> RedisBackend::acquire_answer(Pending& sent, std::chrono::steady_clock::time_point by,
                                                    bool readable) {
  auto& p = static_cast<PendingEval&>(sent);
  auto r = receive_now(*p.eval, by, readable);
  if (!r) return Status(Errc::unavailable, "redirected");  // one server does not redirect
  if (!r->ok()) return r->status();
  return parse_acquire(**r, p.call);
}

Result<ReleaseOutcome> RedisBackend::release_answer(Pending& sent, std::chrono::steady_clock::time_point by,
                                                    bool readable) {
  auto r = receive_now(*static_cast<PendingEval&>(sent).eval, by, readable);
  if (!r) return Status(Errc::unavailable, "redirected");
  if (!r->ok()) return r->status();
  return parse_release(**r);
}

detail::RedisEndpoint RedisBackend::endpoint_of(const ClusterNode& node) const {
  detail::RedisEndpoint ep = config_.endpoint;
  ep.host = node.host;
  ep.port = node.port;
  if (route_->cluster()) ep.db = 0;
  return ep;
}

void RedisBackend::open_blocking() { open_blocking_within(config_.connect_timeout); }

void RedisBackend::open_blocking_within(milliseconds patience) {
  if (!sync_ok() || route_->moves()) return;  // a moving topology's pools fill on first use
  auto c = SyncConnection::open(config_.endpoint, std::min(config_.connect_timeout, patience),
                                std::min(config_.command_timeout, patience), tls_ctx_.get());
  if (!c.ok()) return;
  c.value()->set_command_timeout(config_.command_timeout);
  std::lock_guard lk(pool_mu_);
  pools_[""].push_back(std::move(c.value()));
}

std::optional<Result<Reply>> RedisBackend::eval_now(const ScriptCall& sc, std::chrono::steady_clock::time_point by,
                                                    Status* replicated) {
  auto sent = send_now(sc, by, false, replicated != nullptr);
  if (!sent) return std::nullopt;
  if (!sent->ok()) return Result<Reply>(sent->status());
  return receive_now(*sent->value(), by, false, replicated);
}

std::optional<Result<std::unique_ptr<SentEval>>> RedisBackend::send_now(const ScriptCall& sc,
                                                                        std::chrono::steady_clock::time_point by,
                                                                        bool pooled_only, bool waited) {
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

std::optional<Result<Reply>> RedisBackend::receive_now(SentEval& sent, std::chrono::steady_clock::time_point by,
                                                       bool readable, Status* replicated) {
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

Status RedisBackend::send_script(SentEval& sent, std::string payload) const {
  if (!sent.waited) return sent.conn->send(payload);
  append_wait(payload);
  return sent.conn->send(payload, wait_.timeout);
}

}  // namespace dlock::redis

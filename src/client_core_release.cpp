// The asynchronous release, retried after a lost reply (the script is
// idempotent).
#include "client_core_internal.hpp"

namespace dlock::detail {

void ClientCore::release(std::shared_ptr<Hold> hold, std::function<void(Status)> done) {
  post([self = shared_from_this(), hold = std::move(hold), done = std::move(done)]() mutable {
    self->release_io(std::move(hold), std::move(done));
  });
}

void ClientCore::release_io(std::shared_ptr<Hold> hold, std::function<void(Status)> done) {
  if (closing_) return done(Status(Errc::cancelled, "client closed; its locks were released"));
  adopt_staged();
  ++hold->users;
  auto op = std::make_shared<ReleaseOp>(ReleaseOp{std::move(hold), std::move(done)});
  hold_exec(op->hold, [this, op] {
    if (closing_) {
      return post([done = std::move(op->done)]() mutable {
        done(Status(Errc::cancelled, "client closed; its locks were released"));
      });
    }
    send_release(op);
  });
}

void ClientCore::send_release(const std::shared_ptr<ReleaseOp>& op) {
  const unsigned held = op->hold->depth.load();
  if (held == 0) return end_release(op, 0, Status(Errc::not_held, "the lease no longer holds the lock"));
  // The backend keeps no depth: only the last level goes to the server.
  if (held > 1 && !caps_.server_reentry) return end_release(op, held - 1, Status());
  ReleaseCall call{op->hold->name, op->hold->owner, held, false};
  call.grant = op->hold->grant;
  call.mode = op->hold->mode;
  if (held == 1 && op->hold->stray) call.tombstone = op->hold->lease;
  backend_->release(call, [this, op, held](Result<ReleaseOutcome> r) {
    if (closing_) {
      // The client closed meanwhile (its own release of this hold went out
      // too): the caller still learns what this call's answer said.
      return post([done = std::move(op->done),
                   s = release_result(r, held, op->tries, op->hold->name).second]() mutable { done(std::move(s)); });
    }
    if (!r.ok() && r.code() == Errc::outcome_unknown) outcome_unknown_.fetch_add(1, std::memory_order_relaxed);
    // The script is idempotent: after a lost reply, sending it again is safe.
    if (!r.ok() && r.code() == Errc::outcome_unknown && op->tries < 2) {
      ++op->tries;
      return send_release(op);
    }
    auto [depth, status] = release_result(r, held, op->tries, op->hold->name);
    end_release(op, depth, std::move(status));
  });
}

// Whatever the server said, the level is gone here: a lease we tried to give
// up is never renewed again. If it survived on the server, it expires there.
void ClientCore::end_release(const std::shared_ptr<ReleaseOp>& op, unsigned depth, Status status) {
  Hold& hold = *op->hold;
  const bool was_held = hold.depth.load() > 0;
  hold.depth.store(depth);
  if (depth == 0 && was_held) {
    if (scheduler_.contains(hold.id)) {
      scheduler_.remove(hold.id);
      scheduled_.erase(hold.id);
      rearm_renewal();
    }
    leases_held_.fetch_sub(1, std::memory_order_relaxed);
  }
  --hold.users;
  auto done = std::move(op->done);
  hold_op_done(op->hold);
  // In a handler of its own: it may drop the last Client handle.
  asio::post(rt_->io, [done = std::move(done), status = std::move(status)]() mutable { done(std::move(status)); });
}

}  // namespace dlock::detail
